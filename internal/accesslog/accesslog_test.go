package accesslog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/logging"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
)

type exchange struct{}

var (
	method = []byte("GET")
	host   = []byte("example.test")
	path   = []byte("/api/users/7")
	client = netip.MustParseAddr("192.0.2.10")
)

func (exchange) Method() []byte                      { return method }
func (exchange) Host() []byte                        { return host }
func (exchange) Path() []byte                        { return path }
func (exchange) ClientAddr() netip.Addr              { return client }
func (exchange) HasBody() bool                       { return false }
func (exchange) BodyStarted() bool                   { return false }
func (exchange) Respond(int, []byte, []byte) error   { return nil }
func (exchange) ServeHTTP(http.Handler) (int, int64) { return 0, 0 }

// syncBuffer is a bytes.Buffer a zap core may write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) Sync() error { return nil }

func record() proxy.Record {
	up := &proxy.Upstream{Name: "app"}
	return proxy.Record{
		Route:    &proxy.Route{Name: "api"},
		Upstream: up,
		Backend:  &upstream.Backend{Addr: "10.0.0.1:9000"},
		Status:   200,
		Bytes:    1234,
		Start:    time.Now(),
		Duration: 1500 * time.Microsecond,
		Attempts: 1,
	}
}

func TestRecordWritesEveryField(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, JSON)
	r := record()
	l.Record(exchange{}, r)
	r.Err = errors.New("backend timed out")
	r.Status = 504
	l.Record(exchange{}, r)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.b.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2:\n%s", len(lines), buf.b.String())
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"client": "192.0.2.10", "method": "GET", "host": "example.test", "path": "/api/users/7",
		"status": 200.0, "bytes": 1234.0, "duration": 0.0015, "route": "api", "upstream": "app",
		"backend": "10.0.0.1:9000", "attempts": 1.0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %s: got %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["time"]; !ok {
		t.Error("no time field")
	}
	if !strings.Contains(lines[1], `"error":"backend timed out"`) {
		t.Errorf("second line has no error field: %s", lines[1])
	}
}

func BenchmarkRecord(b *testing.B) {
	sink, err := logging.OpenAccess(config.Logging{Format: "json", AccessLog: b.TempDir() + "/access.log"}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	l := New(sink.W, JSON)
	defer l.Close()
	r := record()
	b.ReportAllocs()
	for b.Loop() {
		l.Record(exchange{}, r)
	}
}

func TestEscapingAndConsole(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, Console)
	r := record()
	l.Record(hostile{}, r)
	l.Close()
	line := buf.b.String()
	fields := strings.SplitN(strings.TrimSpace(line), "\t", 4)
	if len(fields) != 4 || fields[1] != "INFO" || fields[2] != "request" {
		t.Fatalf("got %q, want time, INFO, request and the fields, tab-separated", line)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(fields[3]), &got); err != nil {
		t.Fatalf("fields are not JSON: %v\n%s", err, fields[3])
	}
	if want := "/a\"b\\c\n\x01\ufffd"; got["path"] != want {
		t.Errorf("got path %q, want %q", got["path"], want)
	}
	if _, err := time.Parse("2006-01-02T15:04:05.000Z", fields[0]); err != nil {
		t.Errorf("time %q: %v", fields[0], err)
	}
}

type hostile struct{ exchange }

var hostilePath = []byte("/a\"b\\c\n\x01\xff")

func (hostile) Path() []byte { return hostilePath }

func TestRecordAllocatesNothing(t *testing.T) {
	l := New(io.Discard, JSON)
	defer l.Close()
	r := record()
	allocs := testing.AllocsPerRun(1000, func() { l.Record(exchange{}, r) })
	if allocs != 0 {
		t.Errorf("got %v allocations per line, want 0", allocs)
	}
}

// TestConcurrentRecordsKeepEveryLineWhole logs from several goroutines
// through many buffer swaps: every line must reach the writer exactly
// once and whole, the last ones on Close.
func TestConcurrentRecordsKeepEveryLineWhole(t *testing.T) {
	var out syncBuffer
	l := New(&out, JSON)
	const workers, each = 4, 3000 // about 10 buffers of 64 KiB
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := record()
			for i := 0; i < each; i++ {
				r.Bytes = int64(w*each + i)
				l.Record(exchange{}, r)
			}
		}(w)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool, workers*each)
	for _, line := range strings.Split(strings.TrimSuffix(out.b.String(), "\n"), "\n") {
		var v struct{ Bytes int64 }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("line %q is not whole JSON: %v", line, err)
		}
		if seen[v.Bytes] {
			t.Fatalf("line %d written twice", v.Bytes)
		}
		seen[v.Bytes] = true
	}
	if len(seen) != workers*each {
		t.Fatalf("got %d lines, want %d", len(seen), workers*each)
	}
}

// TestLinesReachTheFileWithinSeconds checks the periodic flush: a line
// is written without Close and without a full buffer.
func TestLinesReachTheFileWithinSeconds(t *testing.T) {
	var out syncBuffer
	l := New(&out, JSON)
	defer l.Close()
	l.Record(exchange{}, record())
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		out.mu.Lock()
		n := out.b.Len()
		out.mu.Unlock()
		if n > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the line was not written within 5s")
}
