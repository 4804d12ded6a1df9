package server

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/tracing/otlp"
)

// Tracing, as the server runs it: the graph of each generation holds the
// tracing.Policy (formats, sampling), so a reload changes sampling from
// the next request on; the exporter (where spans go) lives in s.spans
// and is replaced only when a reload changes its settings, the old one
// exporting what it holds before it closes.

const (
	// exporterGrace is how long a replaced exporter still takes the
	// spans of requests that picked it up before the swap.
	exporterGrace = time.Second
	// exporterTimeout bounds the export of what a closing exporter
	// holds (a reload's old one, or Shutdown's).
	exporterTimeout = 5 * time.Second
	// exportErrorEvery is the least time between two log lines about
	// failed exports (they are counted, each, in the metrics).
	exportErrorEvery = 30 * time.Second
)

// tracingPolicy returns the policy of a tracing block; nil when tracing
// is off.
func tracingPolicy(t *config.Tracing) *tracing.Policy {
	if t == nil {
		return nil
	}
	var formats []tracing.Format
	for _, f := range t.Propagation {
		switch f {
		case config.TracingW3C:
			formats = append(formats, tracing.W3C)
		case config.TracingB3:
			formats = append(formats, tracing.B3)
		}
	}
	return tracing.NewPolicy(t.SampleRatio, t.ParentBased, formats...)
}

// exporterSettings returns where a tracing block sends spans.
func (s *Server) exporterSettings(t *config.Tracing) otlp.Settings {
	return otlp.Settings{
		Endpoint: t.Endpoint, Protocol: t.Protocol, Headers: t.Headers, ServiceName: t.ServiceName,
		OnError: s.exportFailed,
	}
}

// applyTracing makes s.spans export as t says: a new exporter when there
// was none or its settings changed, none when t is nil.
func (s *Server) applyTracing(t *config.Tracing) error {
	if t == nil {
		s.spanSettings = nil
		s.spans.Swap(nil, exporterGrace, exporterTimeout)
		return nil
	}
	st := s.exporterSettings(t)
	if cur := s.spanSettings; cur != nil && cur.Equal(&st) && s.spans.Current() != nil {
		return nil
	}
	e, err := otlp.New(st)
	if err != nil {
		return err
	}
	s.spanSettings = &st
	s.spans.Swap(e, exporterGrace, exporterTimeout)
	return nil
}

// closeTracing exports what the exporter holds and stops it.
func (s *Server) closeTracing() {
	ctx, cancel := context.WithTimeout(context.Background(), exporterTimeout)
	defer cancel()
	if err := s.spans.Close(ctx); err != nil {
		s.log.Warn("tracing: spans not exported at shutdown", zap.Error(err))
	}
}

// exportFailed logs a failed export, at most once per exportErrorEvery.
func (s *Server) exportFailed(err error) {
	now := time.Now().UnixNano()
	last := s.exportErrAt.Load()
	if now-last < int64(exportErrorEvery) || !s.exportErrAt.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("tracing: spans could not be exported (counted in helios_tracing_spans_dropped_total)", zap.Error(err))
}
