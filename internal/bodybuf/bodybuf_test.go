package bodybuf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestBufferSpillsToAFileAndReplays(t *testing.T) {
	dir := t.TempDir()
	var b Buffer
	b.Reset(10, 100, dir)
	want := strings.Repeat("0123456789", 7)
	for i := 0; i < len(want); i += 7 {
		if _, err := b.Write([]byte(want[i : i+7])); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if got := b.Len(); got != int64(len(want)) {
		t.Errorf("got Len %d, want %d", got, len(want))
	}
	if b.f == nil {
		t.Fatal("no file after more than the memory part")
	}
	// The file is unlinked: nothing is left in the directory.
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("got %d files in the temp dir, want 0 (unlinked)", len(ents))
	}
	for round := 0; round < 2; round++ { // a retry sends it again
		var out bytes.Buffer
		if n, err := b.WriteTo(&out); err != nil || n != int64(len(want)) || out.String() != want {
			t.Errorf("round %d: got (%d, %v, %q), want %q", round, n, err, out.String(), want)
		}
	}
	b.Close()
	if b.Len() != 0 || b.f != nil {
		t.Errorf("after Close: got Len %d, file %v, want empty", b.Len(), b.f)
	}
}

func TestBufferFull(t *testing.T) {
	var b Buffer
	b.Reset(4, 4, t.TempDir())
	if _, err := b.Write([]byte("abcdef")); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Write([]byte("ghi")); !errors.Is(err, ErrFull) || n != 0 {
		t.Errorf("got (%d, %v), want (0, ErrFull): nothing kept of a piece that does not fit", n, err)
	}
	if got := b.Room(); got != 2 {
		t.Errorf("got Room %d, want 2", got)
	}
	b.Close()
}

func TestBufferMemoryOnly(t *testing.T) {
	var b Buffer
	b.Reset(8, 0, filepath.Join(t.TempDir(), "missing"))
	if _, err := b.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("9")); !errors.Is(err, ErrFull) {
		t.Errorf("got %v, want ErrFull with no file part", err)
	}
}
