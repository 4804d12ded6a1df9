package accesslog

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/tracing"
	"github.com/helios-lb/helios/internal/wire"
)

// TestTimingAndTraceFields: every line carries the last attempt's queue,
// connect and first-byte times (issue 24), whatever tracing says; a
// request traced also carries its trace and span ids and the sampling
// decision, and one without tracing carries none of them.
func TestTimingAndTraceFields(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, JSON)
	r := record()
	r.Attempts = 2
	r.Timing = wire.Timing{Queue: 2 * time.Millisecond, Connect: 3 * time.Millisecond, FirstByte: 7500 * time.Microsecond}
	l.Record(exchange(), r)
	r.Trace = tracing.Span{
		TraceID: tracing.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  tracing.SpanID{0, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		Sampled: true,
	}
	l.Record(exchange(), r)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2", len(lines))
	}
	for i, line := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]any{"attempts": 2.0, "queue_time": 0.002, "connect_time": 0.003, "first_byte_time": 0.0075, "duration": 0.0015} {
			if got[k] != v {
				t.Errorf("line %d: %s: got %v, want %v", i, k, got[k], v)
			}
		}
		if i == 0 {
			for _, k := range []string{"trace_id", "span_id", "sampled"} {
				if _, ok := got[k]; ok {
					t.Errorf("line without tracing: has %s", k)
				}
			}
			continue
		}
		for k, v := range map[string]any{"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7", "sampled": true} {
			if got[k] != v {
				t.Errorf("traced line: %s: got %v, want %v", k, got[k], v)
			}
		}
	}
}
