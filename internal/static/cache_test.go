package static

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/helios-lb/helios/internal/clock"
	"github.com/helios-lb/helios/internal/listener"
)

// cached opens a one-shard handler on dir whose cache validity is one
// second of clk.
func cached(t *testing.T, dir string, clk *clock.Fake, entries int) *Handler {
	t.Helper()
	return newHandler(t, dir, "", "", Options{CacheEntries: entries, CacheValid: time.Second, Shards: 1, Now: clk.Now})
}

// replace swaps name's content for a new file (a rename, as deploy
// tools do), modified at mtime.
func replace(t *testing.T, dir, name, content string, mtime time.Time) {
	t.Helper()
	tmp := filepath.Join(dir, ".tmp-"+name)
	writeFiles(t, dir, map[string]string{".tmp-" + name: content}, mtime)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// plan plans a GET of p and plays the answer.
func plan(t *testing.T, h *Handler, p string) result {
	t.Helper()
	var a Answer
	h.Plan(get(p), &a)
	return send(t, &a)
}

// TestCacheValidity checks a cached answer is used for CacheValid and
// no longer: a replaced, rewritten, deleted or created file is seen
// only after it.
func TestCacheValidity(t *testing.T) {
	later := fixtureTime.Add(time.Hour)
	tests := []struct {
		name          string
		change        func(t *testing.T, dir string)
		before, after string // status and body
	}{
		{"replaced", func(t *testing.T, dir string) { replace(t, dir, "f", "new content", later) }, "200 old", "200 new content"},
		// A small file is held in memory (inline): what was read is
		// served, whole, until the cache checks the file again.
		{"rewritten in place", func(t *testing.T, dir string) {
			writeFiles(t, dir, map[string]string{"f": "new"}, later)
		}, "200 old", "200 new"},
		{"deleted", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, "f")) }, "200 old", "404 404 Not Found\n"},
		{"created", func(t *testing.T, dir string) { writeFiles(t, dir, map[string]string{"g": "g"}, later) }, "404 404 Not Found\n", "200 g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"f": "old"}, fixtureTime)
			clk := clock.NewFake(fixtureTime)
			h := cached(t, dir, clk, 0)
			p := "/f"
			if tt.name == "created" {
				p = "/g"
			}
			first := plan(t, h, p)
			tt.change(t, dir)
			clk.Advance(time.Second - time.Nanosecond)
			got := plan(t, h, p)
			if s := fmt.Sprintf("%d %s", got.status, got.body); s != tt.before {
				t.Errorf("within CacheValid: got %q, want %q", s, tt.before)
			}
			if got.header.Get("ETag") != first.header.Get("ETag") {
				t.Errorf("within CacheValid: got ETag %q, want the first answer's %q", got.header.Get("ETag"), first.header.Get("ETag"))
			}
			clk.Advance(time.Nanosecond)
			got = plan(t, h, p)
			if s := fmt.Sprintf("%d %s", got.status, got.body); s != tt.after {
				t.Errorf("after CacheValid: got %q, want %q", s, tt.after)
			}
			if got.status == 200 {
				if want := etagOf(later, int64(len(got.body))); got.header.Get("ETag") != want {
					t.Errorf("after CacheValid: got ETag %q, want %q", got.header.Get("ETag"), want)
				}
			}
		})
	}
}

// TestCacheFileOpenWhileSent checks a file that leaves the cache while
// an answer sends from it stays open until that answer's Release, and
// is closed then.
func TestCacheFileOpenWhileSent(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"f": "old"}, fixtureTime)
	clk := clock.NewFake(fixtureTime)
	h := cached(t, dir, clk, 0)
	var held Answer
	h.Plan(get("/f"), &held)
	if held.File == nil {
		t.Fatalf("got no File (status %d), want one", held.Status)
	}
	replace(t, dir, "f", "new", fixtureTime.Add(time.Hour))
	clk.Advance(time.Second)
	if got := plan(t, h, "/f"); got.body != "new" {
		t.Fatalf("got %q, want %q", got.body, "new")
	}
	// The old file is out of the cache; the held answer still reads it.
	b := make([]byte, 3)
	if _, err := held.File.ReadAt(b, 0); err != nil || string(b) != "old" {
		t.Errorf("read the held file: got %q, %v; want %q", b, err, "old")
	}
	f := held.File
	f.Release()
	if _, err := f.(*File).f.ReadAt(b, 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read after the last Release: got %v, want %v", err, os.ErrClosed)
	}
	// The new file, still cached, stays open.
	if got := plan(t, h, "/f"); got.body != "new" {
		t.Errorf("got %q, want %q", got.body, "new")
	}
}

// TestCacheLRU checks the cache holds CacheEntries answers and lets the
// least recently used go first, closing its file.
func TestCacheLRU(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "a", "b": "b", "c": "c"}, fixtureTime)
	h := cached(t, dir, clock.NewFake(fixtureTime), 2)
	p := h.Shard(0)
	plan(t, h, "/a")
	plan(t, h, "/b")
	b := p.m["b"].file
	plan(t, h, "/a") // a is now more recent than b
	plan(t, h, "/c")
	var keys []string
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"a", "c"}; !slices.Equal(keys, want) {
		t.Errorf("cached: got %v, want %v", keys, want)
	}
	if n := p.Len(); n != 2 {
		t.Errorf("Len: got %d, want 2", n)
	}
	if _, err := b.f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read the evicted file: got %v, want %v", err, os.ErrClosed)
	}
	plan(t, h, "/nope")
	if _, ok := p.m["nope"]; !ok || p.Len() != 2 {
		t.Errorf("errors are cached too: got %d entries without \"nope\", want 2 with it", p.Len())
	}
}

// TestCacheOff checks a negative CacheEntries or CacheValid keeps
// nothing: each answer has its own open file, closed by its Release.
func TestCacheOff(t *testing.T) {
	for _, o := range []Options{{CacheEntries: -1}, {CacheValid: -1}} {
		t.Run(fmt.Sprintf("%+v", o), func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"f": "old"}, fixtureTime)
			h := newHandler(t, dir, "", "", o)
			var a1, a2 Answer
			h.Plan(get("/f"), &a1)
			h.Plan(get("/f"), &a2)
			if a1.File == nil || a1.File == a2.File {
				t.Fatalf("got Files %p and %p, want two", a1.File, a2.File)
			}
			f := a1.File
			send(t, &a1)
			if _, err := f.(*File).f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
				t.Errorf("read after Release: got %v, want %v", err, os.ErrClosed)
			}
			send(t, &a2)
			writeFiles(t, dir, map[string]string{"f": "new!"}, fixtureTime)
			if got := plan(t, h, "/f"); got.body != "new!" {
				t.Errorf("got %q, want %q at once", got.body, "new!")
			}
			for i := range len(h.shards) {
				if n := h.Shard(i).Len(); n != 0 {
					t.Errorf("shard %d: got %d entries, want 0", i, n)
				}
			}
		})
	}
}

func TestReleaseTwicePanics(t *testing.T) {
	h := newHandler(t, fixture(t), "", "", Options{CacheEntries: -1})
	var a Answer
	h.Plan(get("/data.txt"), &a)
	f := a.File
	f.Release()
	defer func() {
		if recover() == nil {
			t.Error("got no panic from a second Release, want one")
		}
	}()
	f.Release()
}

func TestShards(t *testing.T) {
	tests := []struct {
		name            string
		o               Options
		shards, entries int
	}{
		{"default", Options{}, runtime.GOMAXPROCS(0), DefaultCacheEntries},
		{"three", Options{Shards: 3, CacheEntries: 10}, 3, 10},
		{"negative is one", Options{Shards: -1}, 1, DefaultCacheEntries},
		{"no more shards than entries", Options{Shards: 8, CacheEntries: 2}, 2, 2},
		{"cache off", Options{Shards: 4, CacheEntries: -1}, 4, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHandler(t, t.TempDir(), "", "", tt.o)
			entries := 0
			for _, p := range h.shards {
				entries += p.max
			}
			if len(h.shards) != tt.shards || entries != tt.entries {
				t.Errorf("got %d shards holding %d entries, want %d holding %d", len(h.shards), entries, tt.shards, tt.entries)
			}
			if n := len(h.shards); h.Shard(n) != h.Shard(0) || h.Shard(-3) != h.Shard(0) || h.Shard(n+n-1) != h.shards[n-1] {
				t.Errorf("Shard(i) is not shard i mod %d (negative: 0)", n)
			}
		})
	}
}

// TestPlanConcurrent plans from several goroutines on shared and own
// shards while files are replaced and time passes, and checks every
// answer is whole: its body is the content its ETag names. Run it with
// -race.
func TestPlanConcurrent(t *testing.T) {
	dir := t.TempDir()
	names := []string{"a", "b", "c", "d"}
	for _, n := range names {
		writeFiles(t, dir, map[string]string{n: "v0"}, fixtureTime)
	}
	clk := clock.NewFake(fixtureTime)
	h := newHandler(t, dir, "", "", Options{CacheEntries: 3, CacheValid: time.Millisecond, Shards: 2, Now: clk.Now})
	const workers, rounds = 4, 300
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan string, workers*rounds+1)
	wg.Go(func() {
		for v := 1; v < 2000; v++ {
			select {
			case <-stop:
				return
			default:
			}
			// Content and modification time move together, so the ETag
			// says which version an answer is.
			n := names[v%len(names)]
			tmp, mtime := filepath.Join(dir, "tmp"), fixtureTime.Add(time.Duration(v)*time.Second)
			err := os.WriteFile(tmp, []byte(strings.Repeat("v", v%7+1)+fmt.Sprint(v)), 0o644)
			if err == nil {
				err = os.Chtimes(tmp, mtime, mtime)
			}
			if err == nil {
				err = os.Rename(tmp, filepath.Join(dir, n))
			}
			if err != nil {
				errs <- err.Error()
				return
			}
			clk.Advance(time.Millisecond)
		}
	})
	var planners sync.WaitGroup
	for w := range workers {
		planners.Go(func() {
			var a Answer
			for i := range rounds {
				h.Shard(w).Plan(get("/"+names[(w+i)%len(names)]), &a)
				if a.Status != 200 || a.File == nil {
					errs <- fmt.Sprintf("got status %d, File %v; want 200 with a File", a.Status, a.File != nil)
					continue
				}
				b := make([]byte, a.Length)
				n, _ := a.File.ReadAt(b, a.Offset)
				a.File.Release()
				v, _ := a.Header.Get("etag")
				etag := string(v)
				if int64(n) != a.Length || !strings.HasSuffix(etag, fmt.Sprintf(`-%x"`, n)) {
					errs <- fmt.Sprintf("got %d bytes %q with ETag %s, want the bytes the ETag names", n, b[:n], etag)
				}
			}
		})
	}
	planners.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCloseReleasesCache checks Close closes the cached files but not
// one an answer still sends from.
func TestCloseReleasesCache(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "a", "b": "b"}, fixtureTime)
	h, err := New(dir, "", "", Options{Shards: 1})
	if err != nil {
		t.Fatal(err)
	}
	plan(t, h, "/a")
	a := h.Shard(0).m["a"].file
	var held Answer
	h.Plan(get("/b"), &held)
	h.Close()
	if _, err := a.f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
		t.Errorf("read a cached file after Close: got %v, want %v", err, os.ErrClosed)
	}
	b := make([]byte, 1)
	if _, err := held.File.ReadAt(b, 0); err != nil || string(b) != "b" {
		t.Errorf("read a held file after Close: got %q, %v; want %q", b, err, "b")
	}
	held.File.Release()
	if n := h.Shard(0).Len(); n != 0 {
		t.Errorf("got %d entries after Close, want 0", n)
	}
}

// TestOutOfDescriptors checks that a process out of descriptors gets
// 503, not 404, and that the 503 is not cached: the file is served as
// soon as a descriptor is free.
func TestOutOfDescriptors(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"f": "content"}, fixtureTime)
	h := cached(t, dir, clock.NewFake(fixtureTime), 0)
	rl := listener.SystemRlimit()
	soft, hard, err := rl.Get()
	if err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	// The lowest free descriptor becomes the limit: every open fails.
	fd, err := syscall.Open("/dev/null", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.Close(fd)
	if err := rl.Set(uint64(fd), hard); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
	var a Answer
	h.Plan(get("/f"), &a)
	if err := rl.Set(soft, hard); err != nil {
		t.Fatalf("restoring the descriptor limit: %v", err)
	}
	if got := send(t, &a); got.status != 503 {
		t.Errorf("out of descriptors: got %d, want 503", got.status)
	}
	if got := plan(t, h, "/f"); got.status != 200 || got.body != "content" {
		t.Errorf("with descriptors again: got %d %q, want 200 %q", got.status, got.body, "content")
	}
}

// TestCacheInline checks a small file the cache keeps is held in memory
// (Bytes), that ranges and reads of it are its bytes, that big files and
// an uncached handler stay on disk, that the budget bounds what is held,
// and that the bytes go back to it when the file's last answer is
// released.
func TestCacheInline(t *testing.T) {
	dir := t.TempDir()
	small := strings.Repeat("0123456789", 100)
	writeFiles(t, dir, map[string]string{
		"small": small,
		"other": "other",
		"big":   strings.Repeat("b", inlineMax+1),
	}, fixtureTime)
	h := cached(t, dir, clock.NewFake(fixtureTime), 1)

	var a Answer
	h.Plan(get("/small", "Range", "bytes=10-19"), &a)
	if a.File == nil || string(a.File.Bytes()) != small {
		t.Fatalf("small file: got File %v, want one holding its %d bytes", a.File, len(small))
	}
	if got := send(t, &a); got.status != 206 || got.body != "0123456789" {
		t.Errorf("range of a held file: got %d %q, want 206 %q", got.status, got.body, "0123456789")
	}
	if n := h.inlined.Load(); n != int64(len(small)) {
		t.Errorf("held: got %d bytes, want %d", n, len(small))
	}
	b := make([]byte, 10)
	h.Plan(get("/small"), &a)
	f := a.File
	if n, err := f.ReadAt(b, int64(len(small)-5)); n != 5 || err != io.EOF || string(b[:5]) != "56789" {
		t.Errorf("ReadAt past the end: got %d %q %v, want 5 %q EOF", n, b[:n], err, "56789")
	}
	// "other" evicts "small" (one entry); a's reference keeps its bytes
	// charged until it is released.
	plan(t, h, "/other")
	if n := h.inlined.Load(); n != int64(len(small)+len("other")) {
		t.Errorf("held while an answer sends: got %d bytes, want %d", n, len(small)+len("other"))
	}
	f.Release()
	if n := h.inlined.Load(); n != int64(len("other")) {
		t.Errorf("held after the last Release: got %d bytes, want %d", n, len("other"))
	}

	h.Plan(get("/big"), &a)
	if a.File == nil || a.File.Bytes() != nil {
		t.Errorf("file over %d bytes: got Bytes of %d, want none", inlineMax, len(a.File.Bytes()))
	}
	if got := send(t, &a); len(got.body) != inlineMax+1 {
		t.Errorf("big file: got %d bytes, want %d", len(got.body), inlineMax+1)
	}

	// A full budget keeps new files on disk, and charges nothing.
	h.inlined.Store(inlineBudget - 10)
	h.Plan(get("/small"), &a)
	if a.File == nil || a.File.Bytes() != nil || h.inlined.Load() != inlineBudget-10 {
		t.Errorf("over budget: got Bytes of %d, %d held; want none, %d", len(a.File.Bytes()), h.inlined.Load(), inlineBudget-10)
	}
	if got := send(t, &a); got.body != small {
		t.Errorf("over budget: got %d bytes, want the file's %d", len(got.body), len(small))
	}

	off := newHandler(t, dir, "", "", Options{CacheValid: -1})
	off.Plan(get("/small"), &a)
	if a.File == nil || a.File.Bytes() != nil || off.inlined.Load() != 0 {
		t.Errorf("cache off: got Bytes of %d, want none", len(a.File.Bytes()))
	}
	send(t, &a)
}
