package tracing

import (
	"strings"
	"testing"

	"github.com/helios-lb/helios/internal/httpmsg"
)

const (
	tid = "4bf92f3577b34da6a3ce929d0e0e4736"
	sid = "00f067aa0ba902b7"
)

func TestParseTraceparent(t *testing.T) {
	tests := []struct {
		name    string
		v       string
		ok      bool
		sampled bool
	}{
		{"sampled", "00-" + tid + "-" + sid + "-01", true, true},
		{"not sampled", "00-" + tid + "-" + sid + "-00", true, false},
		{"other flags", "00-" + tid + "-" + sid + "-03", true, true},
		{"surrounding space", "  00-" + tid + "-" + sid + "-01 ", true, true},
		{"future version, longer", "cc-" + tid + "-" + sid + "-01-what-the-future-holds", true, true},
		{"future version, 55 bytes", "01-" + tid + "-" + sid + "-00", true, false},
		{"version 00 longer", "00-" + tid + "-" + sid + "-01-x", false, false},
		{"future version, no dash after", "cc-" + tid + "-" + sid + "-01x", false, false},
		{"version ff", "ff-" + tid + "-" + sid + "-01", false, false},
		{"upper case", "00-" + strings.ToUpper(tid) + "-" + sid + "-01", false, false},
		{"zero trace id", "00-00000000000000000000000000000000-" + sid + "-01", false, false},
		{"zero span id", "00-" + tid + "-0000000000000000-01", false, false},
		{"short", "00-" + tid[:30] + "-" + sid + "-01", false, false},
		{"bad separator", "00_" + tid + "-" + sid + "-01", false, false},
		{"not hex", "00-" + tid[:31] + "g-" + sid + "-01", false, false},
		{"empty", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := ParseTraceparent([]byte(tt.v))
			if ok != tt.ok {
				t.Fatalf("got ok %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if c.TraceID.String() != tid || c.SpanID.String() != sid || c.Sampled != tt.sampled || !c.Decided || c.Format != W3C {
				t.Errorf("got %s %s sampled=%v decided=%v format=%v", c.TraceID, c.SpanID, c.Sampled, c.Decided, c.Format)
			}
		})
	}
}

func TestPutTraceparentRoundTrips(t *testing.T) {
	for _, sampled := range []bool{true, false} {
		tr, sp := NewTraceID(), NewSpanID()
		buf := make([]byte, 55)
		PutTraceparent(buf, tr, sp, sampled)
		c, ok := ParseTraceparent(buf)
		if !ok || c.TraceID != tr || c.SpanID != sp || c.Sampled != sampled {
			t.Errorf("%s: parsed back as %+v, %v", buf, c, ok)
		}
	}
}

func TestParseB3(t *testing.T) {
	tests := []struct {
		name             string
		single           string
		multi            []string // name, value pairs
		ok               bool
		trace            string
		decided, sampled bool
	}{
		{name: "single sampled", single: tid + "-" + sid + "-1", ok: true, trace: tid, decided: true, sampled: true},
		{name: "single with parent", single: tid + "-" + sid + "-0-05e3ac9a4f6e3b90", ok: true, trace: tid, decided: true},
		{name: "single debug", single: tid + "-" + sid + "-d", ok: true, trace: tid, decided: true, sampled: true},
		{name: "single deferred", single: tid + "-" + sid, ok: true, trace: tid},
		{name: "single 64-bit trace id", single: "a3ce929d0e0e4736-" + sid + "-1", ok: true, trace: "0000000000000000a3ce929d0e0e4736", decided: true, sampled: true},
		{name: "single upper case", single: strings.ToUpper(tid) + "-" + sid + "-1", ok: true, trace: tid, decided: true, sampled: true},
		{name: "single decision only", single: "0", decided: true},
		{name: "single bad state", single: tid + "-" + sid + "-x"},
		{name: "single short span", single: tid + "-" + sid[:15] + "-1"},
		{name: "multi", multi: []string{"X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "1"}, ok: true, trace: tid, decided: true, sampled: true},
		{name: "multi legacy false", multi: []string{"X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "false"}, ok: true, trace: tid, decided: true},
		{name: "multi flags debug", multi: []string{"X-B3-TraceId", tid, "X-B3-SpanId", sid, "X-B3-Sampled", "0", "X-B3-Flags", "1"}, ok: true, trace: tid, decided: true, sampled: true},
		{name: "multi no span", multi: []string{"X-B3-TraceId", tid, "X-B3-Sampled", "1"}, decided: true, sampled: true},
		{name: "multi deferred", multi: []string{"x-b3-traceid", tid, "x-b3-spanid", sid}, ok: true, trace: tid},
	}
	p := NewPolicy(0, true, B3)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h httpmsg.Header
			if tt.single != "" {
				h.Add([]byte("b3"), []byte(tt.single))
			}
			for i := 0; i < len(tt.multi); i += 2 {
				h.Add([]byte(tt.multi[i]), []byte(tt.multi[i+1]))
			}
			c := p.Extract(&h)
			if c.Valid() != tt.ok || c.Decided != tt.decided || c.Sampled != tt.sampled {
				t.Fatalf("got valid=%v decided=%v sampled=%v, want %v %v %v", c.Valid(), c.Decided, c.Sampled, tt.ok, tt.decided, tt.sampled)
			}
			if tt.ok && (c.TraceID.String() != tt.trace || c.SpanID.String() != sid || c.Format != B3) {
				t.Errorf("got %s %s %v, want %s %s B3", c.TraceID, c.SpanID, c.Format, tt.trace, sid)
			}
		})
	}
}

// TestExtractOrder: the policy's first format with a valid context wins.
func TestExtractOrder(t *testing.T) {
	other := "11111111111111111111111111111111"
	var h httpmsg.Header
	h.Add([]byte("traceparent"), []byte("00-"+tid+"-"+sid+"-01"))
	h.Add([]byte("b3"), []byte(other+"-"+sid+"-0"))
	if c := NewPolicy(1, true, W3C, B3).Extract(&h); c.TraceID.String() != tid || c.Format != W3C {
		t.Errorf("w3c first: got %s from %v", c.TraceID, c.Format)
	}
	if c := NewPolicy(1, true, B3, W3C).Extract(&h); c.TraceID.String() != other || c.Format != B3 {
		t.Errorf("b3 first: got %s from %v", c.TraceID, c.Format)
	}
	if c := NewPolicy(1, true, W3C).Extract(&httpmsg.Header{Fields: h.Fields[1:]}); c.Valid() || c.Decided {
		t.Errorf("w3c only, b3 sent: got %+v, want nothing", c)
	}
}

// TestSample: the ratio is OpenTelemetry's TraceIDRatioBased (the last 8
// bytes of the trace id, shifted right by one, against ratio·2^63), so
// services that sample the same ratio agree; parent-based follows a
// caller's decision.
func TestSample(t *testing.T) {
	id := func(last uint64) TraceID {
		var t TraceID
		for i := range 8 {
			t[15-i] = byte(last >> (8 * i))
		}
		return t
	}
	none := Context{}
	tests := []struct {
		name        string
		ratio       float64
		parentBased bool
		parent      Context
		last        uint64
		want        bool
	}{
		{"ratio 0", 0, true, none, 0, false},
		{"ratio 1", 1, true, none, ^uint64(0), true},
		{"half, low id", 0.5, true, none, 1<<63 - 1, true},
		{"half, high id", 0.5, true, none, 1 << 63, false},
		{"parent sampled, ratio 0", 0, true, Context{Decided: true, Sampled: true}, 0, true},
		{"parent not sampled, ratio 1", 1, true, Context{Decided: true}, 0, false},
		{"parent ignored", 0, false, Context{Decided: true, Sampled: true}, 0, false},
		{"parent undecided", 1, true, Context{}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := NewPolicy(tt.ratio, tt.parentBased).Sample(&tt.parent, id(tt.last)); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Statistically: 0.25 samples about a quarter of random traces.
	p, n, hits := NewPolicy(0.25, false), 20000, 0
	for range n {
		if p.Sample(&none, NewTraceID()) {
			hits++
		}
	}
	if r := float64(hits) / float64(n); r < 0.23 || r > 0.27 {
		t.Errorf("ratio 0.25 sampled %.3f of %d traces", r, n)
	}
}

type arena struct{ b []byte }

func (a *arena) Alloc(n int) []byte {
	if cap(a.b)-len(a.b) < n {
		a.b = make([]byte, 0, 1024)
	}
	i := len(a.b)
	a.b = a.b[:i+n]
	return a.b[i : i+n : i+n]
}

func fields(h *httpmsg.Header) map[string]string {
	m := map[string]string{}
	for _, f := range h.Fields {
		if !f.Drop {
			m[strings.ToLower(string(f.Name))] = string(f.Value)
		}
	}
	return m
}

// TestInject writes every format of the policy, replaces what the caller
// sent in it, and keeps tracestate only with the traceparent it came
// with.
func TestInject(t *testing.T) {
	tr, _ := ParseTraceparent([]byte("00-" + tid + "-" + sid + "-01"))
	span := SpanID{1, 2, 3, 4, 5, 6, 7, 8}
	newHeader := func() *httpmsg.Header {
		var h httpmsg.Header
		h.Add([]byte("traceparent"), []byte("00-"+tid+"-"+sid+"-01"))
		h.Add([]byte("tracestate"), []byte("vendor=x"))
		h.Add([]byte("b3"), []byte(tid+"-"+sid+"-1"))
		h.Add([]byte("X-B3-Flags"), []byte("1"))
		return &h
	}
	h := newHeader()
	NewPolicy(1, true, W3C, B3).Inject(h, &arena{}, tr.TraceID, span, true, W3C)
	want := map[string]string{
		"traceparent":  "00-" + tid + "-0102030405060708-01",
		"tracestate":   "vendor=x",
		"x-b3-traceid": tid,
		"x-b3-spanid":  "0102030405060708",
		"x-b3-sampled": "1",
	}
	if got := fields(h); len(got) != len(want) {
		t.Errorf("got fields %v, want %v", got, want)
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: got %q, want %q", k, got[k], v)
			}
		}
	}
	// A trace Helios started: the caller's tracestate belongs to no one.
	h = newHeader()
	NewPolicy(1, true, W3C).Inject(h, &arena{}, tr.TraceID, span, false, 0)
	got := fields(h)
	if _, ok := got["tracestate"]; ok {
		t.Errorf("tracestate kept on a new trace: %v", got)
	}
	if got["traceparent"] != "00-"+tid+"-0102030405060708-00" || got["b3"] == "" {
		t.Errorf("w3c only: got %v, want traceparent replaced and b3 untouched", got)
	}
}

// TestRequestPathAllocatesNothing: reading, deciding and writing a
// context costs no allocation (the header's backing array and the arena
// are reused, as an engine's are).
func TestRequestPathAllocatesNothing(t *testing.T) {
	p := NewPolicy(0.5, true, W3C, B3)
	h := httpmsg.Header{Fields: make([]httpmsg.Field, 0, 16)}
	in := []byte("00-" + tid + "-" + sid + "-01")
	a := &arena{b: make([]byte, 0, 4096)}
	allocs := testing.AllocsPerRun(1000, func() {
		h.Reset()
		a.b = a.b[:0]
		h.Add(nameTraceparent, in)
		c := p.Extract(&h)
		tr := c.TraceID
		if !c.Valid() {
			tr = NewTraceID()
		}
		s := p.Sample(&c, tr)
		p.Inject(&h, a, tr, NewSpanID(), s, c.Format)
	})
	if allocs != 0 {
		t.Errorf("got %v allocations per request, want 0", allocs)
	}
}
