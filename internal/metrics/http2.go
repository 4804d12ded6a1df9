package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/helios-lb/helios/internal/wire"
)

// http2Descs are the HTTP/2 series, read from the listeners' counters
// (h2.Stats) when Prometheus scrapes.
type http2Descs struct {
	streams, refused, resets, tooLarge, protocolErrors, closes *prometheus.Desc
}

func newHTTP2Descs() http2Descs {
	return http2Descs{
		streams: prometheus.NewDesc("helios_http2_streams_total",
			"HTTP/2 streams clients opened, by listener.", []string{"listener"}, nil),
		refused: prometheus.NewDesc("helios_http2_streams_refused_total",
			"HTTP/2 streams refused for passing the concurrent stream limit (each ends its connection: GOAWAY ENHANCE_YOUR_CALM), by listener.", []string{"listener"}, nil),
		resets: prometheus.NewDesc("helios_http2_stream_resets_total",
			"HTTP/2 streams reset, by listener and kind: client (RST_STREAM from the client), rapid (reset before it was answered, the rapid-reset signal), protocol (reset by Helios for the client's stream error), stalled (reset by Helios: its window stayed shut).",
			[]string{"listener", "kind"}, nil),
		tooLarge: prometheus.NewDesc("helios_http2_header_list_too_large_total",
			"HTTP/2 requests answered 431 because their decoded header list passed the limit (HPACK bombs), by listener.", []string{"listener"}, nil),
		protocolErrors: prometheus.NewDesc("helios_http2_protocol_errors_total",
			"HTTP/2 connections closed for a client's protocol error, by listener.", []string{"listener"}, nil),
		closes: prometheus.NewDesc("helios_http2_limit_closes_total",
			"HTTP/2 connections closed by an abuse limit or a timeout, by listener and limit: rapid_reset, header_flood (CONTINUATION), header_timeout (a header block left unfinished), settings_flood, ping_flood, empty_frames, refused_streams, stream_errors (reset flood), control_queue (a client that does not read), slow_reader, stalled_window, settings_timeout, ping_timeout, idle.",
			[]string{"listener", "limit"}, nil),
	}
}

// collectHTTP2 sends the HTTP/2 series of every listener.
func (m *Metrics) collectHTTP2(ch chan<- prometheus.Metric) {
	for name, s := range m.src.HTTP2Stats() {
		counter := func(d *prometheus.Desc, v *atomic.Uint64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v.Load()), append([]string{name}, labels...)...)
		}
		d := &m.http2
		counter(d.streams, &s.StreamsOpened)
		counter(d.refused, &s.StreamsRefused)
		counter(d.resets, &s.PeerResets, "client")
		counter(d.resets, &s.RapidResets, "rapid")
		counter(d.resets, &s.StreamErrors, "protocol")
		counter(d.resets, &s.StalledStreamResets, "stalled")
		counter(d.tooLarge, &s.HeaderListTooLarge)
		counter(d.protocolErrors, &s.ProtocolErrors)
		for _, c := range []struct {
			limit string
			v     *atomic.Uint64
		}{
			{"rapid_reset", &s.RapidResetCloses},
			{"header_flood", &s.HeaderFloodCloses},
			{"header_timeout", &s.HeaderTimeoutCloses},
			{"settings_flood", &s.SettingsFloodCloses},
			{"ping_flood", &s.PingFloodCloses},
			{"empty_frames", &s.EmptyFrameFloodCloses},
			{"refused_streams", &s.RefusedStreamCloses},
			{"stream_errors", &s.StreamErrorCloses},
			{"control_queue", &s.ControlQueueCloses},
			{"slow_reader", &s.SlowReaderCloses},
			{"stalled_window", &s.StalledConnCloses},
			{"settings_timeout", &s.SettingsTimeouts},
			{"ping_timeout", &s.PingTimeouts},
			{"idle", &s.IdleCloses},
		} {
			counter(d.closes, c.v, c.limit)
		}
	}
}

// Protocols counts requests by protocol and TLS version, for
// helios_requests_by_protocol_total: a fixed table of atomic counters,
// so the request path pays one add and no allocation.
type Protocols struct {
	n [len(protoNames)][len(tlsNames)]atomic.Uint64
}

var (
	protoNames = [...]string{"HTTP/1.0", "HTTP/1.1", "HTTP/2.0", "other"}
	tlsNames   = [...]string{"none", "1.2", "1.3", "other"}
)

// count adds one request of ex.
func (p *Protocols) count(ex wire.Exchange) {
	pi := len(protoNames) - 1
	switch string(ex.Proto()) {
	case "HTTP/1.1":
		pi = 1
	case "HTTP/2.0":
		pi = 2
	case "HTTP/1.0":
		pi = 0
	}
	ti := len(tlsNames) - 1
	switch v := ex.TLSVersion(); {
	case v == nil:
		ti = 0
	case string(v) == "1.3":
		ti = 2
	case string(v) == "1.2":
		ti = 1
	}
	p.n[pi][ti].Add(1)
}

// collect sends the non-zero counts.
func (p *Protocols) collect(ch chan<- prometheus.Metric, d *prometheus.Desc) {
	for i := range p.n {
		for j := range p.n[i] {
			if v := p.n[i][j].Load(); v > 0 {
				ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), protoNames[i], tlsNames[j])
			}
		}
	}
}
