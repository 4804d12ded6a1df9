package discovery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/helios-lb/helios/internal/discovery/dnstest"
)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestLookupAddrs checks A and AAAA lookups: both kinds of address, the
// smallest TTL, NXDOMAIN and a name without addresses as ErrNoRecords,
// and a server failure as an error that is not.
func TestLookupAddrs(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set(t, "app.test", dns.TypeA, "app.test. 30 IN A 127.0.0.2", "app.test. 10 IN A 127.0.0.1")
	srv.Set(t, "app.test", dns.TypeAAAA, "app.test. 20 IN AAAA ::1")
	srv.Set(t, "v4.test", dns.TypeA, "v4.test. 7 IN A 127.0.0.3")
	srv.Set(t, "txt.test", dns.TypeTXT, `txt.test. 7 IN TXT "no address"`)
	srv.SetRcode("broken.test", dns.RcodeServerFailure)
	r := NewResolver(srv.Addr())

	tests := []struct {
		name      string
		want      string
		ttl       time.Duration
		noRecords bool
		fails     bool
	}{
		{name: "app.test", want: "[127.0.0.2 127.0.0.1 ::1]", ttl: 10 * time.Second},
		{name: "v4.test.", want: "[127.0.0.3]", ttl: 7 * time.Second},
		{name: "missing.test", noRecords: true},
		{name: "txt.test", noRecords: true},
		{name: "broken.test", fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addrs, ttl, err := r.LookupAddrs(ctx(t), tt.name)
			switch {
			case tt.noRecords:
				if !errors.Is(err, ErrNoRecords) {
					t.Errorf("got %v, %v, want ErrNoRecords", addrs, err)
				}
			case tt.fails:
				if err == nil || errors.Is(err, ErrNoRecords) || !strings.Contains(err.Error(), "SERVFAIL") {
					t.Errorf("got %v, %v, want a SERVFAIL error", addrs, err)
				}
			default:
				if err != nil || fmt.Sprint(addrs) != tt.want || ttl != tt.ttl {
					t.Errorf("got %v, ttl %v, %v, want %s, ttl %v", addrs, ttl, err, tt.want, tt.ttl)
				}
			}
		})
	}
}

// TestTruncatedAnswerAskedAgainOverTCP checks that an answer too large
// for UDP, which comes back truncated, is asked for again over TCP.
func TestTruncatedAnswerAskedAgainOverTCP(t *testing.T) {
	srv := dnstest.Start(t)
	var rrs []string
	for i := 1; i <= 100; i++ {
		rrs = append(rrs, fmt.Sprintf("big.test. 5 IN A 10.0.%d.%d", i/250, i%250))
	}
	srv.Set(t, "big.test", dns.TypeA, rrs...)
	srv.TruncateOver(10)
	addrs, _, err := NewResolver(srv.Addr()).LookupAddrs(ctx(t), "big.test")
	if err != nil || len(addrs) != 100 {
		t.Fatalf("got %d addresses, %v, want 100", len(addrs), err)
	}
	if all, tcp := srv.Queries("big.test", dns.TypeA); all != 2 || tcp != 1 {
		t.Errorf("got %d queries, %d over TCP, want 2 (UDP, then TCP)", all, tcp)
	}
}

// TestSearchList checks that a relative name is tried with the search
// suffixes, as resolv.conf says, and that a failing server stops the
// search rather than find the name under another suffix.
func TestSearchList(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set(t, "app.svc.test", dns.TypeA, "app.svc.test. 5 IN A 127.0.0.9")
	srv.Set(t, "app.other.test", dns.TypeA, "app.other.test. 5 IN A 127.0.0.10")
	r := &Resolver{Servers: []string{srv.Addr()}, Search: []string{"ns.test.", "svc.test.", "other.test."}, Ndots: 5}
	addrs, _, err := r.LookupAddrs(ctx(t), "app")
	if err != nil || fmt.Sprint(addrs) != "[127.0.0.9]" {
		t.Errorf("got %v, %v, want [127.0.0.9] (app.svc.test)", addrs, err)
	}
	srv.SetRcode("app.svc.test", dns.RcodeRefused)
	if addrs, _, err := r.LookupAddrs(ctx(t), "app"); err == nil || errors.Is(err, ErrNoRecords) {
		t.Errorf("with app.svc.test refused: got %v, %v, want the refusal", addrs, err)
	}
}

// TestSystemResolver checks what is read from a resolv.conf file.
func TestSystemResolver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(path, []byte("nameserver 127.0.0.53\nnameserver ::1\nsearch a.test b.test\noptions ndots:3\n"), 0o644)
	r, err := SystemResolver(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(r.Servers, r.Search, r.Ndots); got != "[127.0.0.53:53 [::1]:53] [a.test b.test] 3" {
		t.Errorf("got %s", got)
	}
	os.WriteFile(path, []byte("search a.test\n"), 0o644)
	if _, err := SystemResolver(path); err == nil {
		t.Errorf("got no error for a resolv.conf without name servers")
	}
}

// TestSRV checks SRV sources: the lowest priority only, ports and weights
// from the records (scaled into 1-1000, 0 read as 1), targets' addresses
// from the additional section or looked up, and targets that do not exist
// or are "." left out.
func TestSRV(t *testing.T) {
	srv := dnstest.Start(t)
	name := "_http._tcp.app.test"
	srv.Set(t, name, dns.TypeSRV,
		name+". 30 IN SRV 10 5 8001 a.test.",
		name+". 30 IN SRV 10 0 8002 b.test.",
		name+". 30 IN SRV 10 3 8003 gone.test.",
		name+". 30 IN SRV 20 9 8009 backup.test.")
	srv.SetExtra(t, name, dns.TypeSRV, "a.test. 30 IN A 127.0.0.1")
	srv.Set(t, "b.test", dns.TypeA, "b.test. 4 IN A 127.0.0.2")
	srv.Set(t, "b.test", dns.TypeAAAA, "b.test. 4 IN AAAA ::1")
	srv.Set(t, "backup.test", dns.TypeA, "backup.test. 30 IN A 127.0.0.9")
	s := &SRV{Resolver: NewResolver(srv.Addr()), Name: name}
	ans, err := s.Fetch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(ans.Targets), "[{127.0.0.1:8001 5} {127.0.0.2:8002 1} {[::1]:8002 1}]"; got != want || ans.TTL != 4*time.Second {
		t.Errorf("got %s, ttl %v, want %s, ttl 4s", got, ans.TTL, want)
	}
	if all, _ := srv.Queries("a.test", dns.TypeA); all != 0 {
		t.Errorf("got %d queries for a.test, want 0 (its address came with the answer)", all)
	}

	// Weights beyond 1000 are scaled, keeping their ratios.
	srv.Set(t, name, dns.TypeSRV, name+". 30 IN SRV 0 65535 8001 b.test.", name+". 30 IN SRV 0 6553 8002 b.test.", name+". 30 IN SRV 0 1 8003 b.test.")
	srv.Set(t, "b.test", dns.TypeAAAA)
	ans, err = s.Fetch(ctx(t))
	if got, want := fmt.Sprint(ans.Targets), "[{127.0.0.2:8001 1000} {127.0.0.2:8002 100} {127.0.0.2:8003 1}]"; err != nil || got != want {
		t.Errorf("scaled: got %s, %v, want %s", got, err, want)
	}

	// A target whose lookup fails keeps the last good set: the whole
	// fetch fails.
	srv.SetRcode("b.test", dns.RcodeServerFailure)
	if _, err := s.Fetch(ctx(t)); err == nil || errors.Is(err, ErrNoRecords) {
		t.Errorf("with a target's lookup failing: got %v, want an error", err)
	}

	srv.Set(t, name, dns.TypeSRV, name+". 30 IN SRV 0 0 0 .")
	if _, err := s.Fetch(ctx(t)); !errors.Is(err, ErrNoRecords) {
		t.Errorf(`with the "." target: got %v, want ErrNoRecords`, err)
	}
}

// fakeSource answers what it is told to.
type fakeSource struct {
	mu      sync.Mutex
	ans     Answer
	err     error
	fetches int
}

func (f *fakeSource) set(ans Answer, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ans, f.err = ans, err
}

func (f *fakeSource) Fetch(context.Context) (Answer, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches++
	return f.ans, f.err
}

func (f *fakeSource) String() string { return "fake" }

func targets(addrs ...string) []Target {
	var ts []Target
	for _, a := range addrs {
		ts = append(ts, Target{Addr: a, Weight: 1})
	}
	return ts
}

// TestWatcherKeepsLastGoodSet checks that a failed lookup and an empty
// answer leave the set as it was and are counted and told, that an empty
// answer is a set only with AllowEmpty, and when the next lookup comes.
func TestWatcherKeepsLastGoodSet(t *testing.T) {
	src := &fakeSource{}
	var told []string
	o := Options{Every: 8 * time.Second, Min: time.Second, Timeout: time.Second,
		OnError: func(err error, repeated bool) { told = append(told, fmt.Sprint(repeated)) }}
	w := NewWatcher(src, o)

	steps := []struct {
		name    string
		ans     Answer
		err     error
		changed bool
		fails   bool
		want    string
		next    time.Duration
	}{
		{name: "first", ans: Answer{Targets: targets("a:1", "b:1")}, changed: true, want: "[{a:1 1} {b:1 1}]", next: 8 * time.Second},
		{name: "same", ans: Answer{Targets: targets("a:1", "b:1")}, want: "[{a:1 1} {b:1 1}]", next: 8 * time.Second},
		{name: "short TTL", ans: Answer{Targets: targets("a:1", "b:1"), TTL: 3 * time.Second}, want: "[{a:1 1} {b:1 1}]", next: 3 * time.Second},
		{name: "TTL below the minimum", ans: Answer{Targets: targets("a:1"), TTL: time.Millisecond}, changed: true, want: "[{a:1 1}]", next: time.Second},
		{name: "failure", err: errors.New("SERVFAIL"), fails: true, want: "[{a:1 1}]", next: time.Second},
		{name: "failure again", err: errors.New("SERVFAIL"), fails: true, want: "[{a:1 1}]", next: 2 * time.Second},
		{name: "empty", err: fmt.Errorf("x: %w", ErrNoRecords), fails: true, want: "[{a:1 1}]", next: 4 * time.Second},
		{name: "empty without an error", fails: true, want: "[{a:1 1}]", next: 8 * time.Second},
		{name: "empty once more", fails: true, want: "[{a:1 1}]", next: 8 * time.Second},
		{name: "back", ans: Answer{Targets: targets("c:1")}, changed: true, want: "[{c:1 1}]", next: 8 * time.Second},
	}
	for _, s := range steps {
		src.set(s.ans, s.err)
		changed, err := w.Refresh(context.Background())
		got, _ := w.Targets()
		if changed != s.changed || (err != nil) != s.fails || fmt.Sprint(got) != s.want || w.next != s.next {
			t.Errorf("%s: got changed %v, err %v, %v, next %v; want changed %v, failed %v, %s, next %v",
				s.name, changed, err, got, w.next, s.changed, s.fails, s.want, s.next)
		}
	}
	st := w.Status()
	if st.Errors != 5 || st.LastError != "" || !st.Good {
		t.Errorf("got status %+v, want 5 errors, none last, a good set", st)
	}
	if got := fmt.Sprint(told); got != "[false true false false true]" {
		t.Errorf("got OnError repeated flags %s, want [false true false false true]", got)
	}

	w = NewWatcher(src, Options{Every: time.Second, Min: time.Second, Timeout: time.Second, AllowEmpty: true})
	src.set(Answer{Targets: targets("a:1")}, nil)
	w.Refresh(context.Background())
	src.set(Answer{}, fmt.Errorf("x: %w", ErrNoRecords))
	if changed, err := w.Refresh(context.Background()); !changed || err != nil {
		t.Errorf("allowed empty answer: got changed %v, %v, want a change to no backends", changed, err)
	}
	if got, ok := w.Targets(); len(got) != 0 || !ok {
		t.Errorf("allowed empty answer: got %v, %v, want none, a good set", got, ok)
	}
}

// TestWatcherFollowsTTL runs a watcher against a DNS server whose record
// has a TTL of one second and a refresh of an hour: the TTL brings the
// lookups forward, and a record whose TTL is 0 is looked up no more often
// than the minimum allows.
func TestWatcherFollowsTTL(t *testing.T) {
	srv := dnstest.Start(t)
	srv.Set(t, "ttl.test", dns.TypeA, "ttl.test. 1 IN A 127.0.0.1")
	srv.Set(t, "zero.test", dns.TypeA, "zero.test. 0 IN A 127.0.0.1")
	r := NewResolver(srv.Addr())
	changes := make(chan struct{}, 10)
	w := NewWatcher(&DNS{Resolver: r, Name: "ttl.test", Port: 80, Weight: 1}, Options{Every: time.Hour, Min: 100 * time.Millisecond, Timeout: time.Second})
	w.SetNotify(func() { changes <- struct{}{} })
	zero := NewWatcher(&DNS{Resolver: r, Name: "zero.test", Port: 80, Weight: 1}, Options{Every: time.Hour, Min: 400 * time.Millisecond, Timeout: time.Second})
	start := time.Now()
	w.Start()
	zero.Start()
	defer w.Stop()
	defer zero.Stop()

	<-changes // the first lookup
	srv.Set(t, "ttl.test", dns.TypeA, "ttl.test. 1 IN A 127.0.0.2")
	select {
	case <-changes:
	case <-time.After(5 * time.Second):
		t.Fatalf("no change seen 5s after the record changed, its TTL being 1s")
	}
	if got, _ := w.Targets(); fmt.Sprint(got) != "[{127.0.0.2:80 1}]" {
		t.Errorf("got %v, want [{127.0.0.2:80 1}]", got)
	}
	zero.Stop()
	elapsed := time.Since(start)
	if n, _ := srv.Queries("zero.test", dns.TypeA); n < 1 || n > int(elapsed/(400*time.Millisecond))+1 {
		t.Errorf("got %d lookups of a 0s-TTL name in %v, want at most one per 400ms (the minimum)", n, elapsed)
	}
}

// TestFileSource checks a backends file read again as it changes: in
// place or replaced by a rename, a broken file (its error once, with
// FILE:LINE, and the last good set kept), an empty list and a missing
// file.
func TestFileSource(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "backends.yaml")
	write := func(content string) {
		tmp := filepath.Join(dir, "tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	var errs []string
	w := NewWatcher(&File{Path: path}, Options{Every: time.Second, Min: time.Second, Timeout: time.Second,
		OnError: func(err error, _ bool) { errs = append(errs, err.Error()) }})
	refresh := func(step string, wantChanged bool, want string) {
		t.Helper()
		changed, _ := w.Refresh(context.Background())
		got, _ := w.Targets()
		if changed != wantChanged || fmt.Sprint(got) != want {
			t.Errorf("%s: got changed %v, %v, want changed %v, %s", step, changed, got, wantChanged, want)
		}
	}

	refresh("missing", false, "[]")
	write("- address: 127.0.0.1:80\n- {address: \"127.0.0.2:80\", weight: 2}\n")
	refresh("written", true, "[{127.0.0.1:80 1} {127.0.0.2:80 2}]")
	refresh("unchanged", false, "[{127.0.0.1:80 1} {127.0.0.2:80 2}]")
	if err := os.WriteFile(path, []byte(`[{"address": "127.0.0.3:80"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	refresh("rewritten in place as JSON", true, "[{127.0.0.3:80 1}]")
	write("- address: 127.0.0.4:80\n- address: 127.0.0.5\n")
	refresh("broken", false, "[{127.0.0.3:80 1}]")
	refresh("still broken", false, "[{127.0.0.3:80 1}]")
	write("[]\n")
	refresh("empty", false, "[{127.0.0.3:80 1}]")
	write("- address: 127.0.0.4:80\n")
	refresh("fixed", true, "[{127.0.0.4:80 1}]")
	os.Remove(path)
	refresh("removed", false, "[{127.0.0.4:80 1}]")
	refresh("still removed", false, "[{127.0.0.4:80 1}]")

	if len(errs) != 4 {
		t.Fatalf("got %d errors, want 4 (missing, broken, empty, removed): %q", len(errs), errs)
	}
	if want := path + `:2: [1].address: "127.0.0.5" is not host:port`; !strings.HasPrefix(errs[1], want) {
		t.Errorf("got %q, want it to start with %q", errs[1], want)
	}
	if !strings.Contains(errs[2], "allow_empty") {
		t.Errorf("got %q for an empty list, want it to say allow_empty", errs[2])
	}
	if st := w.Status(); st.Errors != 4 {
		t.Errorf("got %d errors counted, want 4", st.Errors)
	}
}

// TestFailuresReadTheSame checks that a server that does not answer, or
// refuses the connection, fails with the same message every time, so
// that a failure that lasts is logged once (the local port of each query
// is left out).
func TestFailuresReadTheSame(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // never answers
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for _, server := range []string{pc.LocalAddr().String(), "127.0.0.1:1"} {
		var msgs []string
		for range 2 {
			c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			_, _, err := NewResolver(server).LookupAddrs(c, "app.test")
			cancel()
			if err == nil {
				t.Fatalf("%s: got no error", server)
			}
			msgs = append(msgs, err.Error())
		}
		if msgs[0] != msgs[1] {
			t.Errorf("%s: got %q, then %q, want the same message", server, msgs[0], msgs[1])
		}
	}
}
