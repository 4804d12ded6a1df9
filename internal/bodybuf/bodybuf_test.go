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
	b.Reset(10, 100, dir, nil)
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
	b.Reset(4, 4, t.TempDir(), nil)
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
	b.Reset(8, 0, filepath.Join(t.TempDir(), "missing"), nil)
	if _, err := b.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Write([]byte("9")); !errors.Is(err, ErrFull) {
		t.Errorf("got %v, want ErrFull with no file part", err)
	}
}

// TestBufferAccounting: a Buffer charged to an account takes room from
// the account's cap and from the process budget, memory first and then
// file (which also takes the memory the budget could not give), holds no
// more than it was granted, and gives everything back when closed.
func TestBufferAccounting(t *testing.T) {
	dir := t.TempDir()
	budget := NewBudget(30, 1000)
	acct := NewAccount(100, budget)
	var a, b Buffer
	a.Reset(40, 1000, dir, acct)
	if got := a.Grow(50); got != 50 {
		t.Fatalf("got room %d, want 50", got)
	}
	if m, f := heldBy(budget); m != 30 || f != 20 {
		t.Errorf("budget: got (%d, %d) held, want (30, 20): memory ran out at the budget", m, f)
	}
	if got := a.MemRoom(); got != 30 {
		t.Errorf("got MemRoom %d, want 30", got)
	}
	if _, err := a.Write(make([]byte, 50)); err != nil {
		t.Fatal(err)
	}
	if f, n := a.File(); f == nil || n != 20 || len(a.Mem()) != 30 {
		t.Errorf("got %d bytes in memory and %d in a file, want 30 and 20", len(a.Mem()), n)
	}
	if _, err := a.Write([]byte("x")); !errors.Is(err, ErrFull) {
		t.Errorf("a write past the room granted: got %v, want ErrFull", err)
	}
	// The second buffer of the connection gets what the account has
	// left, all of it in a file: the memory budget is spent.
	b.Reset(40, 1000, dir, acct)
	if got := b.Grow(80); got != 50 {
		t.Errorf("second buffer: got room %d, want the account's 50 left", got)
	}
	if b.MemRoom() != 0 {
		t.Errorf("second buffer: got MemRoom %d, want 0", b.MemRoom())
	}
	if got := b.Grow(80); got != 50 || b.AtCap() {
		t.Errorf("second buffer, account spent: got room %d (at its caps %v), want 50, short of budget rather than at its caps", got, b.AtCap())
	}
	if got := acct.Held(); got != 100 {
		t.Errorf("account: got %d held, want 100", got)
	}
	b.Trim()
	if got := acct.Held(); got != 50 {
		t.Errorf("account after the unused room went back: got %d held, want 50", got)
	}
	a.Close()
	b.Close()
	if m, f := heldBy(budget); m != 0 || f != 0 || acct.Held() != 0 {
		t.Errorf("after Close: got (%d, %d) held by the budget and %d by the account, want nothing", m, f, acct.Held())
	}
}

// TestBufferAtCap: a buffer whose caps are reached is at its caps; one
// whose budget is spent is not.
func TestBufferAtCap(t *testing.T) {
	budget := NewBudget(1000, 1000)
	var b Buffer
	b.Reset(10, 0, "", NewAccount(1000, budget))
	b.Grow(100)
	b.Write(make([]byte, 10))
	if b.Grow(1) != 0 || !b.AtCap() {
		t.Errorf("memory-only buffer, full: got room %d, at cap %v, want 0 and true", b.Room(), b.AtCap())
	}
	b.Close()
	budget.SetCaps(5, 0)
	b.Reset(10, 0, "", NewAccount(1000, budget))
	b.Grow(100)
	b.Write(make([]byte, 5))
	if b.Grow(1) != 0 || b.AtCap() {
		t.Errorf("budget spent: got room %d, at cap %v, want 0 and false", b.Room(), b.AtCap())
	}
	b.Close()
}

// heldBy returns what b holds in memory and in files.
func heldBy(b *Budget) (memory, file int64) {
	st := b.Stats()
	return st.Memory, st.File
}
