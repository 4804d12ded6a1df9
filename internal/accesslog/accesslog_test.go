package accesslog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/logging"
	"github.com/helios-lb/helios/internal/proxy"
	"github.com/helios-lb/helios/internal/upstream"
	"github.com/helios-lb/helios/internal/wire"
	"github.com/helios-lb/helios/internal/wire/wiretest"
)

var (
	method = []byte("GET")
	host   = []byte("example.test")
	path   = []byte("/api/users/7")
	client = netip.MustParseAddr("192.0.2.10")
)

// exchange is a plain finished request.
func exchange() *wiretest.Exchange {
	return &wiretest.Exchange{MethodV: method, HostV: host, PathV: path, Client: client}
}

// browser is an exchange with a query, a protocol, a TLS version and
// headers.
var browser = &wiretest.Exchange{
	MethodV: method, HostV: host, PathV: path, Client: client,
	QueryV:  []byte("q=1&lang=en"),
	ProtoV:  []byte("HTTP/1.1"),
	TLSV:    []byte("1.3"),
	Headers: map[string][]byte{"User-Agent": []byte("Mozilla/5.0 (X11)"), "Referer": []byte("https://example.test/start")},
}

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
	id := proxy.RequestID{}
	id.SetClient([]byte("3f2a9c"))
	return proxy.Record{
		RequestID: id,
		Route:     &proxy.Route{Name: "api"},
		Upstream:  up,
		Backend:   &upstream.Backend{Addr: "10.0.0.1:9000"},
		Status:    200,
		Bytes:     1234,
		Start:     time.Now(),
		Duration:  1500 * time.Microsecond,
		Attempts:  1,
	}
}

func TestRecordWritesEveryField(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, JSON)
	r := record()
	l.Record(browser, r)
	r.Err = errors.New("backend timed out")
	r.Status = 504
	l.Record(exchange(), r)
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
		"query": "q=1&lang=en", "proto": "HTTP/1.1", "tls": "1.3", "user_agent": "Mozilla/5.0 (X11)",
		"referer": "https://example.test/start", "request_id": "3f2a9c",
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
	if strings.Contains(lines[1], `"tls"`) {
		t.Errorf("a cleartext request has a tls field: %s", lines[1])
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
		l.Record(exchange(), r)
	}
}

func TestEscapingAndConsole(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, Console)
	r := record()
	hostile := exchange()
	hostile.PathV = hostilePath
	l.Record(hostile, r)
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

var hostilePath = []byte("/a\"b\\c\n\x01\xff")

func TestRecordAllocatesNothing(t *testing.T) {
	for _, f := range []Format{JSON, Console, Combined} {
		l := New(io.Discard, f)
		r := record()
		var ex wire.Exchange = browser // boxed once, as an engine's exchange is
		allocs := testing.AllocsPerRun(1000, func() { l.Record(ex, r) })
		if allocs != 0 {
			t.Errorf("format %d: got %v allocations per line, want 0", f, allocs)
		}
		l.Close()
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
				l.Record(exchange(), r)
			}
		}(w)
	}
	wg.Wait()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]bool, workers*each)
	if out.b.Len() == 0 {
		t.Fatalf("nothing written")
	}
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
	// A writer that falls queueBlocks blocks behind loses whole blocks, counted;
	// here it normally keeps up, and no line is ever lost uncounted.
	if got := uint64(len(seen)) + l.Dropped(); got != workers*each {
		t.Fatalf("got %d lines written and %d dropped, want %d in all", len(seen), l.Dropped(), workers*each)
	}
}

// TestLinesReachTheFileWithinSeconds checks the periodic flush: a line
// is written without Close and without a full buffer.
func TestLinesReachTheFileWithinSeconds(t *testing.T) {
	var out syncBuffer
	l := New(&out, JSON)
	defer l.Close()
	l.Record(exchange(), record())
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

func TestCombinedFormat(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, Combined)
	r := record()
	r.Start = time.Date(2026, 11, 21, 5, 31, 59, 0, time.Local)
	r.Duration = 0
	l.Record(browser, r)
	l.Record(exchange(), r)
	hostileUA := *browser
	hostileUA.Headers = map[string][]byte{"User-Agent": []byte("evil\" \\ \n\x7f"), "Referer": browser.Headers["Referer"]}
	l.Record(&hostileUA, r)
	l.Close()
	ts := r.Start.Format("02/Jan/2006:15:04:05 -0700")
	want := []string{
		`192.0.2.10 - - [` + ts + `] "GET /api/users/7?q=1&lang=en HTTP/1.1" 200 1234 "https://example.test/start" "Mozilla/5.0 (X11)"`,
		// An engine that tells no protocol: a request line without one,
		// as nginx logs HTTP/0.9.
		`192.0.2.10 - - [` + ts + `] "GET /api/users/7" 200 1234 "-" "-"`,
		`192.0.2.10 - - [` + ts + `] "GET /api/users/7?q=1&lang=en HTTP/1.1" 200 1234 "https://example.test/start" "evil\x22 \x5c \x0a\x7f"`,
	}
	got := strings.Split(strings.TrimSuffix(buf.b.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(got), len(want), buf.b.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\ngot  %s\nwant %s", i, got[i], want[i])
		}
	}
}

func TestParseFormat(t *testing.T) {
	for name, want := range map[string]Format{"json": JSON, "console": Console, "combined": Combined} {
		if got, err := ParseFormat(name); got != want || err != nil {
			t.Errorf("%s: got %v, %v; want %v", name, got, err, want)
		}
	}
	if _, err := ParseFormat("common"); err == nil || err.Error() != `"common" is not an access log format (json, console, combined)` {
		t.Errorf("common: got %v, want an error listing the formats", err)
	}
}

// stalledWriter blocks every write until released, like a stalled disk
// or a pipe nobody reads.
type stalledWriter struct {
	release chan struct{}
	mu      sync.Mutex
	n       int // lines
	bytes   int
}

func (w *stalledWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	w.n += bytes.Count(p, []byte("\n"))
	w.bytes += len(p)
	w.mu.Unlock()
	return len(p), nil
}

// TestRecordNeverWaitsForTheWriter guards issue 12: a full buffer was
// written by the request that filled it, on the event loop. With the
// writer stalled, Record must still return at once; what does not fit in
// the queue is dropped and counted, and every other line is written once
// the writer moves again.
func TestRecordNeverWaitsForTheWriter(t *testing.T) {
	w := &stalledWriter{release: make(chan struct{})}
	l := New(w, JSON)
	const lines = 200000 // about 600 blocks of 64 KiB: far more than the queue holds
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := record()
		for i := 0; i < lines; i++ {
			l.Record(browser, r)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		close(w.release)
		t.Fatal("Record waited for a stalled writer")
	}
	dropped := l.Dropped()
	if dropped == 0 {
		t.Errorf("got nothing dropped with the writer stalled, want the overflow dropped")
	}
	close(w.release)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	written, writtenBytes := w.n, w.bytes
	w.mu.Unlock()
	if uint64(written)+dropped != lines {
		t.Errorf("got %d written + %d dropped, want %d", written, dropped, lines)
	}
	// What was queued (up to queueBlocks full blocks and one being
	// written) must be kept: at least queueBlocks+1 blocks' worth.
	if min := (queueBlocks + 1) * flushSize; writtenBytes < min {
		t.Errorf("got %d bytes written, want at least %d (the queue's worth)", writtenBytes, min)
	}
}

func TestRecordAfterCloseIsCounted(t *testing.T) {
	var buf syncBuffer
	l := New(&buf, JSON)
	l.Close()
	l.Record(exchange(), record())
	if got := l.Dropped(); got != 1 {
		t.Errorf("got %v dropped, want 1", got)
	}
	if buf.b.Len() != 0 {
		t.Errorf("got %q written after Close, want nothing", buf.b.String())
	}
}

func TestSwitchSwapsWithoutLosingALine(t *testing.T) {
	var a, b syncBuffer
	var s Switch
	s.Record(exchange(), record()) // no logger: nothing, no panic
	s.Swap(New(&a, JSON), 0, nil)
	s.Record(exchange(), record())
	closed := make(chan error, 1)
	s.Swap(New(&b, Combined), 10*time.Millisecond, func(err error) { closed <- err })
	s.Record(exchange(), record())
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(a.b.String(), "\n"); got != 1 || !strings.HasPrefix(a.b.String(), "{") {
		t.Errorf("first logger: got %q, want one JSON line", a.b.String())
	}
	done := make(chan error, 1)
	s.Swap(nil, 0, func(err error) { done <- err })
	<-done
	if got := b.b.String(); strings.Count(got, "\n") != 1 || !strings.HasPrefix(got, "192.0.2.10 - - [") {
		t.Errorf("second logger: got %q, want one combined line", got)
	}
	if s.Dropped() != 0 {
		t.Errorf("dropped: got %v, want 0", s.Dropped())
	}
}
