package compress

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

func decode(t *testing.T, c Coding, b []byte) []byte {
	t.Helper()
	var r io.Reader
	switch c {
	case Gzip:
		gr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		r = gr
	case Zstd:
		zr, err := zstd.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	case Brotli:
		r = brotli.NewReader(bytes.NewReader(b))
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decoding %v: %v", c, err)
	}
	return out
}

// TestRoundTrip: a body compressed in pieces, with flushes between some,
// decodes to itself, for every coding, and an encoder reused from the
// pool starts a fresh stream.
func TestRoundTrip(t *testing.T) {
	p, err := NewPool(0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	body := bytes.Repeat([]byte(`{"id": 12345, "name": "helios", "tags": ["a", "b"]}`+"\n"), 2000)
	for _, c := range []Coding{Gzip, Zstd, Brotli} {
		for round := 0; round < 3; round++ {
			e := p.Get(c)
			var out []byte
			for rest := body; len(rest) > 0; {
				n := min(len(rest), 1+rng.IntN(8000))
				b, err := e.Transform(rest[:n], rng.IntN(4) == 0, false)
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, b...)
				rest = rest[n:]
			}
			b, err := e.Transform(nil, false, true)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
			p.Put(e)
			if got := decode(t, c, out); !bytes.Equal(got, body) {
				t.Fatalf("%v round %d: decoded %d bytes, want the %d sent", c, round, len(got), len(body))
			}
			if len(out) >= len(body)/4 {
				t.Errorf("%v: got %d bytes from %d, want it compressed", c, len(out), len(body))
			}
		}
	}
}

// TestFlushDecodes: what comes out at a flush decodes to what went in so
// far, for a client that reads an answer as it trickles.
func TestFlushDecodes(t *testing.T) {
	p, _ := NewPool(0, 0, 0)
	for _, c := range []Coding{Gzip, Brotli} { // zstd's reader wants the frame's end
		e := p.Get(c)
		first, err := e.Transform([]byte("event: one\n\n"), true, false)
		if err != nil || len(first) == 0 {
			t.Fatalf("%v: flush gave %d bytes, %v; want some", c, len(first), err)
		}
		var r io.Reader
		if c == Gzip {
			gr, err := gzip.NewReader(bytes.NewReader(first))
			if err != nil {
				t.Fatal(err)
			}
			r = gr
		} else {
			r = brotli.NewReader(bytes.NewReader(first))
		}
		buf := make([]byte, 12)
		if _, err := io.ReadFull(r, buf); err != nil || string(buf) != "event: one\n\n" {
			t.Errorf("%v: read %q, %v after the flush; want the first event", c, buf, err)
		}
		p.Put(e)
	}
}

func TestPoolLevels(t *testing.T) {
	for _, l := range [][3]int{{10, 0, 0}, {0, 23, 0}, {0, 0, 12}, {-1, 0, 0}} {
		if _, err := NewPool(l[0], l[1], l[2]); err == nil {
			t.Errorf("levels %v: got no error, want one", l)
		}
	}
}

// BenchmarkEncoders compresses a 20 KiB JSON answer (the bench's
// compress scenario) with each coding at the levels worth comparing:
// the CPU an answer costs, per coding and level.
func BenchmarkEncoders(b *testing.B) {
	body := apiJSON(20 << 10)
	for _, bc := range []struct {
		c     Coding
		level int
	}{{Gzip, 1}, {Gzip, 5}, {Gzip, 9}, {Zstd, 1}, {Zstd, 3}, {Brotli, 1}, {Brotli, 4}, {Brotli, 6}} {
		b.Run(fmt.Sprintf("%v-%d", bc.c, bc.level), func(b *testing.B) {
			levels := [nCodings]int{}
			levels[bc.c] = bc.level
			p, err := NewPool(levels[Gzip], levels[Zstd], levels[Brotli])
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			var out int
			for b.Loop() {
				e := p.Get(bc.c)
				o, _ := e.Transform(body, false, true)
				out = len(o)
				e.Release()
			}
			b.ReportMetric(float64(len(body))/float64(out), "ratio")
		})
	}
}

// TestReleaseReturnsToPool: InUse counts the encoders out of the pool,
// and Release (the engine's end of an answer) gives one back.
func TestReleaseReturnsToPool(t *testing.T) {
	p, _ := NewPool(0, 0, 0)
	var es []*Encoder
	for _, c := range []Coding{Gzip, Zstd, Brotli} {
		es = append(es, p.Get(c))
	}
	if got := p.InUse(); got != 3 {
		t.Fatalf("got %d encoders in use, want 3", got)
	}
	for _, e := range es {
		e.Release()
	}
	if got := p.InUse(); got != 0 {
		t.Errorf("after Release: got %d encoders in use, want 0", got)
	}
}

// TestEncoderMemoryIsBounded: an encoder that has compressed a long
// answer holds a few MiB, not the 10 MiB that zstd's and brotli's
// default windows (8 and 4 MiB) make it hold, so that memory follows
// the answers being compressed at once, not their size.
func TestEncoderMemoryIsBounded(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory counts in the heap")
	}
	body := make([]byte, 3<<20)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range body {
		body[i] = "abcdefghij{}\":, \n"[rng.IntN(17)]
	}
	const n, limit = 3, 4 << 20
	for _, c := range []Coding{Gzip, Zstd, Brotli} {
		p, _ := NewPool(0, 0, 0)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		es := make([]*Encoder, n)
		for i := range es {
			es[i] = p.Get(c)
			for rest := body; len(rest) > 0; rest = rest[64<<10:] {
				if _, err := es[i].Transform(rest[:64<<10], false, false); err != nil {
					t.Fatal(err)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
		if per > limit {
			t.Errorf("%v: got %d KiB per encoder after 3 MiB, want at most %d", c, per>>10, limit>>10)
		}
		runtime.KeepAlive(es)
	}
}

// apiJSON returns about n bytes of JSON such as an API answers with:
// records whose keys repeat and whose values vary.
func apiJSON(n int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"}
	b := []byte(`{"items":[`)
	for i := 0; len(b) < n; i++ {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"name":"%s %s","price":%d.%02d,"stock":%d,"active":%t,"updated":"2025-%02d-%02dT%02d:%02d:%02dZ","tags":["%s","%s"]}`,
			100000+rng.IntN(900000), words[rng.IntN(10)], words[rng.IntN(10)], rng.IntN(1000), rng.IntN(100), rng.IntN(500),
			rng.IntN(2) == 0, 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), words[rng.IntN(10)], words[rng.IntN(10)])
	}
	return append(b, "]}"...)
}
