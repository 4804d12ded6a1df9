package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/helios-lb/helios/internal/acme"
	"github.com/helios-lb/helios/internal/bodybuf"
	"github.com/helios-lb/helios/internal/engine"
	"github.com/helios-lb/helios/internal/h2"
	"github.com/helios-lb/helios/internal/listener"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/redisstore"
	"github.com/helios-lb/helios/internal/tlsconf"
	"github.com/helios-lb/helios/internal/wire"
)

// fakeSource serves a graph without routes and the given HTTP/2 counters.
type fakeSource struct{ h2 map[string]*h2.Stats }

func (fakeSource) Graph() *proxy.Graph                   { return &proxy.Graph{} }
func (fakeSource) BreakerState(string, string) int       { return -1 }
func (fakeSource) OpenConnections() map[string]int64     { return nil }
func (fakeSource) AcceptErrors() map[string]uint64       { return nil }
func (fakeSource) Panics() uint64                        { return 0 }
func (fakeSource) Descriptors() listener.DescriptorStats { return listener.DescriptorStats{} }
func (fakeSource) TLSProviders() []*tlsconf.Provider     { return nil }
func (fakeSource) ACMEManagers() []*acme.Manager         { return nil }
func (s fakeSource) HTTP2Stats() map[string]*h2.Stats    { return s.h2 }
func (fakeSource) ResponseBuffers() bodybuf.BudgetStats  { return bodybuf.BudgetStats{} }
func (fakeSource) RequestBuffers() bodybuf.BudgetStats {
	return bodybuf.BudgetStats{Memory: 3, File: 4}
}
func (fakeSource) ListenerStats() map[string]*engine.ListenerStats {
	return nil
}
func (fakeSource) Stores() []*redisstore.Store { return nil }

// protoExchange is an exchange of which only the protocol and the TLS
// version are read.
type protoExchange struct {
	wire.Exchange
	proto, tls string
}

func (e protoExchange) Proto() []byte { return []byte(e.proto) }
func (e protoExchange) TLSVersion() []byte {
	if e.tls == "" {
		return nil
	}
	return []byte(e.tls)
}

// gather returns the value of every series of the named family, by its
// labels rendered as "name=value,...".
func gather(t *testing.T, reg *prometheus.Registry, family string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != family {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labels(m)] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return out
}

func labels(m *dto.Metric) string {
	s := ""
	for i, l := range m.GetLabel() {
		if i > 0 {
			s += ","
		}
		s += l.GetName() + "=" + l.GetValue()
	}
	return s
}

func TestRequestsByProtocol(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := New(reg, fakeSource{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range []protoExchange{
		{proto: "HTTP/1.1"}, {proto: "HTTP/1.1"}, {proto: "HTTP/1.0"},
		{proto: "HTTP/2.0", tls: "1.3"}, {proto: "HTTP/2.0", tls: "1.3"}, {proto: "HTTP/2.0"},
		{proto: "HTTP/1.1", tls: "1.2"}, {proto: "", tls: "0.9"},
	} {
		m.Record(ex, proxy.Record{Status: 200})
	}
	got := gather(t, reg, "helios_requests_by_protocol_total")
	want := map[string]float64{
		"protocol=HTTP/1.1,tls=none": 2,
		"protocol=HTTP/1.0,tls=none": 1,
		"protocol=HTTP/2.0,tls=1.3":  2,
		"protocol=HTTP/2.0,tls=none": 1,
		"protocol=HTTP/1.1,tls=1.2":  1,
		"protocol=other,tls=other":   1,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series %v, want %d", len(got), got, len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
}

func TestHTTP2Counters(t *testing.T) {
	var s h2.Stats
	s.StreamsOpened.Add(7)
	s.RapidResets.Add(3)
	s.PeerResets.Add(4)
	s.RapidResetCloses.Add(1)
	s.HeaderFloodCloses.Add(2)
	s.SlowReaderCloses.Add(5)
	s.HeaderTimeoutCloses.Add(6)
	reg := prometheus.NewRegistry()
	if _, err := New(reg, fakeSource{h2: map[string]*h2.Stats{"web": &s}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		family, labels string
		want           float64
	}{
		{"helios_http2_streams_total", "listener=web", 7},
		{"helios_http2_stream_resets_total", "kind=rapid,listener=web", 3},
		{"helios_http2_stream_resets_total", "kind=client,listener=web", 4},
		{"helios_http2_limit_closes_total", "limit=rapid_reset,listener=web", 1},
		{"helios_http2_limit_closes_total", "limit=header_flood,listener=web", 2},
		{"helios_http2_limit_closes_total", "limit=slow_reader,listener=web", 5},
		{"helios_http2_limit_closes_total", "limit=header_timeout,listener=web", 6},
		{"helios_http2_limit_closes_total", "limit=ping_flood,listener=web", 0},
		{"helios_request_buffer_bytes", "where=memory", 3},
		{"helios_request_buffer_bytes", "where=file", 4},
	}
	for _, tt := range tests {
		t.Run(tt.family+"/"+tt.labels, func(t *testing.T) {
			got, ok := gather(t, reg, tt.family)[tt.labels]
			if !ok || got != tt.want {
				t.Errorf("got %v (present %v), want %v", got, ok, tt.want)
			}
		})
	}
}
