package bodybuf

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
)

// drain reads everything s holds now, in order, in pieces of at most max.
func drain(t *testing.T, s *Spool, max int) string {
	t.Helper()
	var out strings.Builder
	buf := make([]byte, 4)
	for {
		p, err := s.Front(buf)
		if err != nil {
			t.Fatalf("Front: %v", err)
		}
		if len(p) == 0 {
			return out.String()
		}
		p = p[:min(len(p), max)]
		out.Write(p)
		s.Advance(len(p))
	}
}

// put puts p in s as an owner would: memory while it has room, then the
// file (written here, in line).
func put(t *testing.T, s *Spool, dir string, p []byte) {
	t.Helper()
	n := s.PutMem(p)
	if rest := p[n:]; len(rest) > 0 {
		if int64(len(rest)) > s.FileRoom() {
			t.Fatalf("%d bytes do not fit: file room %d", len(rest), s.FileRoom())
		}
		f := s.BeginFile(len(rest))
		f, m, err := AppendFile(f, dir, rest)
		s.EndFile(f, rest, m, err)
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpoolKeepsOrderAcrossMemoryAndFile(t *testing.T) {
	dir := t.TempDir()
	b := NewBudget(100, 1000)
	var s Spool
	if !s.Start(8, 100, b, -1) {
		t.Fatal("Start refused an answer of unknown length")
	}
	if got := b.Stats().Memory; got != 8 {
		t.Errorf("got %d bytes of memory reserved, want 8", got)
	}
	if !s.Grow(50) {
		t.Fatal("Grow refused")
	}
	var want, got strings.Builder
	// Memory fills, then the file; reading the front between writes
	// lets memory be used again only once the file part is read.
	for i, piece := range []string{"abc", "defgh", "ijklm", "no", "pq", "rstuvwxyz"} {
		put(t, &s, dir, []byte(piece))
		want.WriteString(piece)
		if i%2 == 1 {
			got.WriteString(drain(t, &s, 3))
		}
	}
	got.WriteString(drain(t, &s, 100))
	if got.String() != want.String() {
		t.Errorf("got %q, want %q", got.String(), want.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("got %d files in the temp dir, want 0 (unlinked)", len(ents))
	}
	if st := b.Stats(); st.Spilled == 0 {
		t.Error("nothing counted as spilled")
	}
	s.Close()
	if st := b.Stats(); st.Memory != 0 || st.File != 0 {
		t.Errorf("after Close: got %d memory and %d file bytes held, want none", st.Memory, st.File)
	}
}

func TestSpoolStartReservesKnownLengths(t *testing.T) {
	tests := []struct {
		name            string
		memCap, fileCap int64 // the budget's
		memMax          int
		fileMax         int64
		want            int64
		ok              bool
		mem, file       int64 // reserved
	}{
		{"fits in memory", 100, 100, 64, 100, 50, true, 50, 0},
		{"memory then file", 100, 100, 64, 100, 100, true, 64, 36},
		{"over the answer's file cap", 100, 100, 64, 30, 100, false, 0, 0},
		{"over the budget's file cap", 100, 10, 64, 100, 100, false, 0, 0},
		{"no memory left: all in the file", 0, 100, 64, 100, 100, true, 0, 100},
		{"no memory left, file too small", 0, 100, 64, 50, 100, false, 0, 0},
		{"unknown length takes memory only", 100, 100, 64, 100, -1, true, 64, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.memCap, tt.fileCap)
			var s Spool
			if got := s.Start(tt.memMax, tt.fileMax, b, tt.want); got != tt.ok {
				t.Errorf("got Start %v, want %v", got, tt.ok)
			}
			if st := b.Stats(); st.Memory != tt.mem || st.File != tt.file {
				t.Errorf("got %d/%d bytes reserved, want %d/%d", st.Memory, st.File, tt.mem, tt.file)
			}
			s.Close()
			if st := b.Stats(); st.Memory != 0 || st.File != 0 {
				t.Errorf("after Close: got %d/%d bytes held, want none", st.Memory, st.File)
			}
		})
	}
}

func TestSpoolGrowStopsAtCaps(t *testing.T) {
	b := NewBudget(0, 100)
	var s, other Spool
	s.Start(0, 60, b, -1)
	other.Start(0, 60, b, -1)
	if !s.Grow(40) || !s.Grow(40) {
		t.Fatal("Grow refused within both caps")
	}
	if got := s.FileRoom(); got != 60 {
		t.Errorf("got file room %d, want 60 (the answer's cap)", got)
	}
	if s.Grow(1) {
		t.Error("Grow past the answer's cap")
	}
	if !other.Grow(60) {
		t.Fatal("Grow refused 40 bytes left in the budget")
	}
	if got := other.FileRoom(); got != 40 {
		t.Errorf("got file room %d, want 40 (what the budget had left)", got)
	}
	s.Close()
	if !other.Grow(20) {
		t.Error("Grow refused after the other spool gave its share back")
	}
	other.Close()
}

func TestSpoolFailedWriteKeepsTheBytes(t *testing.T) {
	b := NewBudget(100, 100)
	var s Spool
	s.Start(2, 50, b, -1)
	s.Grow(50)
	put(t, &s, t.TempDir(), []byte("ab"))
	// A write that took 3 bytes of 6 and failed: the rest is kept, in
	// order, and the file takes nothing more.
	p := []byte("cdefgh")
	f := s.BeginFile(len(p))
	f, _, _ = AppendFile(f, t.TempDir(), p[:3])
	s.EndFile(f, p, 3, errors.New("disk full"))
	if got := s.FileRoom(); got != 0 {
		t.Errorf("got file room %d after a failed write, want 0", got)
	}
	if got := s.MemRoom(); got != 0 {
		t.Errorf("got memory room %d with the tail waiting, want 0", got)
	}
	if got := drain(t, &s, 2); got != "abcdefgh" {
		t.Errorf("got %q, want %q", got, "abcdefgh")
	}
	if s.Len() != 0 {
		t.Errorf("got Len %d after reading everything, want 0", s.Len())
	}
	s.Close()
}

func TestSpoolFrontWaitsForAWriteUnderWay(t *testing.T) {
	var s Spool
	s.Start(0, 10, nil, -1)
	s.Grow(10)
	p := []byte("xyz")
	f := s.BeginFile(len(p))
	if got, _ := s.Front(make([]byte, 8)); len(got) != 0 {
		t.Errorf("got %q while the write is under way, want nothing", got)
	}
	if s.Len() != 3 {
		t.Errorf("got Len %d, want 3 (the bytes being written count)", s.Len())
	}
	f, n, err := AppendFile(f, t.TempDir(), p)
	s.EndFile(f, p, n, err)
	if got, _ := s.Front(make([]byte, 8)); !bytes.Equal(got, p) {
		t.Errorf("got %q, want %q", got, p)
	}
	s.Close()
}
