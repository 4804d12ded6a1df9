// Package bodybuf holds message bodies in memory up to a size, then in an
// unlinked temporary file up to a cap: a request body while Helios reads
// it from the client before choosing a backend (request buffering,
// Buffer), and an answer between a backend and a client that reads it
// more slowly (response buffering, Spool), within what a process may hold
// (Budget). A slow client then costs a backend nothing, and a buffered
// request body can be sent again on a retry.
//
// Request bodies are accounted for at two levels besides each body's own
// caps: an Account per client connection (the streams of an HTTP/2
// connection share one) and the process's Budget for request buffering,
// in memory and in temporary files. A Buffer charged to an Account takes
// room from both before it keeps bytes (Grow) and gives it back when it
// is closed, so a client that opens many streams, or many connections,
// cannot make the process hold more than the budgets allow.
package bodybuf

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// ErrFull is returned by Write when p does not fit in the room the Buffer
// has; nothing of p was kept.
var ErrFull = errors.New("bodybuf: body larger than the buffer")

// Account bounds what the Buffers of one client connection hold together,
// in memory and in files, and charges it to a Budget. It is safe for
// concurrent use (a Buffer may be closed off its connection's loop).
type Account struct {
	cap    int64
	budget *Budget
	held   atomic.Int64
}

// NewAccount returns an Account of at most cap bytes whose Buffers draw
// on budget.
func NewAccount(cap int64, budget *Budget) *Account {
	return &Account{cap: cap, budget: budget}
}

// Held returns the bytes the Account's Buffers hold.
func (a *Account) Held() int64 { return a.held.Load() }

// grant takes up to n bytes of memory (mem) or of file room from the
// account and its budget, and returns how many.
func (a *Account) grant(n int64, mem bool) int64 {
	g := upTo(&a.held, a.cap, n)
	if g == 0 {
		return 0
	}
	var got int64
	if mem {
		got = a.budget.takeMemUpTo(g)
	} else {
		got = a.budget.takeFileUpTo(g)
	}
	a.held.Add(got - g)
	return got
}

// Reserve takes n bytes of memory from the account and its budget, all
// or nothing, for a body held outside a Buffer (a small one read whole
// behind its head); Release gives them back.
func (a *Account) Reserve(n int64) bool {
	if g := a.grant(n, true); g < n {
		a.release(g, 0)
		return false
	}
	return true
}

// Release gives back n bytes of memory Reserve took.
func (a *Account) Release(n int64) { a.release(n, 0) }

// release gives back what grant took.
func (a *Account) release(mem, file int64) {
	a.held.Add(-(mem + file))
	a.budget.give(mem, file)
}

// Buffer is one body, held in memory and then in a file. The zero value
// holds nothing; call Reset before use. Not safe for concurrent use.
type Buffer struct {
	mem []byte
	// memCap is the body's memory cap; memMax, the part of it granted
	// (all of it without an account). sealed: memory takes no more (the
	// cap or the budgets ran out), the file takes the rest.
	memCap, memMax int
	sealed         bool
	// The file part: created on the first byte past the memory part,
	// unlinked at once so that nothing is left behind by a crash.
	f                *os.File
	fileLen          int64
	fileCap, fileMax int64
	dir              string
	acct             *Account
}

// Reset empties b (closing its file, giving back what it held) and sets
// its caps: memMax bytes in memory, then fileMax bytes in a file in dir
// ("" for os.TempDir). A zero fileMax keeps everything in memory. With an
// account, room is charged to it as Grow takes it; without (nil), all of
// the caps are room at once.
func (b *Buffer) Reset(memMax int, fileMax int64, dir string, acct *Account) {
	b.Close()
	b.mem = b.mem[:0]
	b.memCap, b.fileCap, b.dir, b.acct = memMax, fileMax, dir, acct
	b.sealed = false
	if acct == nil {
		b.memMax, b.fileMax = memMax, fileMax
	}
}

// Grow makes room for up to n more bytes, as the caps, the account and
// its budget allow: in memory while the memory part may grow, then in the
// file (which then also takes the memory the budget could not give). It
// returns the room there is now (Room). Without an account it changes
// nothing.
func (b *Buffer) Grow(n int64) int64 {
	if b.acct == nil {
		return b.Room()
	}
	if need := n - b.Room(); need > 0 && !b.sealed {
		g := b.acct.grant(min(need, int64(b.memCap-b.memMax)), true)
		b.memMax += int(g)
		if g < need {
			// Memory is done: what comes next goes to the file.
			b.sealed = true
		}
	}
	if need := n - b.Room(); need > 0 && b.sealed {
		b.fileMax += b.acct.grant(min(need, b.fileRoomCap()-b.fileMax), false)
	}
	return b.Room()
}

// fileRoomCap is what the file part may take: its cap, and the memory
// the body's memory part did not use (but nothing when there is no file
// part).
func (b *Buffer) fileRoomCap() int64 {
	if b.fileCap == 0 {
		return 0
	}
	return b.fileCap + int64(b.memCap-len(b.mem))
}

// AtCap reports whether b holds all its caps allow: a body with no room
// left is too large for them, rather than short of budget.
func (b *Buffer) AtCap() bool { return b.Len() >= b.Cap() }

// Trim gives back room taken and not used (once the body is whole).
func (b *Buffer) Trim() {
	if b.acct == nil {
		return
	}
	mem, file := int64(b.memMax-len(b.mem)), b.fileMax-b.fileLen
	b.acct.release(mem, file)
	b.memMax, b.fileMax = len(b.mem), b.fileLen
}

// Mem returns the memory part of the body.
func (b *Buffer) Mem() []byte { return b.mem }

// File returns the file part: the open file (nil when there is none) and
// its length. The caller does not close it.
func (b *Buffer) File() (*os.File, int64) { return b.f, b.fileLen }

// MemRoom returns how many more bytes fit in memory; a Write of at most
// that many never touches the disk.
func (b *Buffer) MemRoom() int {
	if b.fileLen > 0 {
		return 0
	}
	return b.memMax - len(b.mem)
}

// Len returns the bytes held.
func (b *Buffer) Len() int64 { return int64(len(b.mem)) + b.fileLen }

// Cap returns how many bytes b holds at most, in memory and file: its
// caps, whatever the account grants.
func (b *Buffer) Cap() int64 {
	if b.fileCap == 0 {
		return int64(b.memCap)
	}
	return int64(b.memCap) + b.fileCap
}

// Room returns how many more bytes fit.
func (b *Buffer) Room() int64 { return int64(b.memMax) + b.fileMax - b.Len() }

// Write keeps p whole, or returns ErrFull and keeps none of it.
func (b *Buffer) Write(p []byte) (int, error) {
	if int64(len(p)) > b.Room() {
		return 0, ErrFull
	}
	n := 0
	if b.fileLen == 0 && len(b.mem) < b.memMax {
		n = min(len(p), b.memMax-len(b.mem))
		if need := len(b.mem) + n; need > cap(b.mem) {
			// Grown within the memory granted, never past it: what
			// the account is charged is what is allocated, at most.
			m := make([]byte, len(b.mem), min(max(2*cap(b.mem), need), b.memMax))
			copy(m, b.mem)
			b.mem = m
		}
		b.mem = append(b.mem, p[:n]...)
	}
	if n == len(p) {
		return n, nil
	}
	if b.f == nil {
		f, err := tempFile(b.dir)
		if err != nil {
			return n, fmt.Errorf("buffering a request body: %w", err)
		}
		b.f = f
	}
	m, err := b.f.Write(p[n:])
	b.fileLen += int64(m)
	if err != nil {
		return n + m, fmt.Errorf("buffering a request body: %w", err)
	}
	return len(p), nil
}

// WriteTo writes everything held to w, memory part first. It may be
// called again (a retry sends the body again).
func (b *Buffer) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(b.mem)
	total := int64(n)
	if err != nil || b.f == nil {
		return total, err
	}
	if _, err := b.f.Seek(0, io.SeekStart); err != nil {
		return total, err
	}
	// A *net.TCPConn takes a LimitedReader over a file with sendfile(2).
	m, err := io.Copy(w, &io.LimitedReader{R: b.f, N: b.fileLen})
	return total + m, err
}

// keepMem is the most memory a Buffer keeps for reuse once closed: a
// connection that buffered a large body must not hold on to it idle.
const keepMem = 16 << 10

// Close releases the file, if any, memory beyond keepMem, and what the
// account was charged.
func (b *Buffer) Close() {
	if b.f != nil {
		b.f.Close()
		b.f = nil
	}
	if b.acct != nil {
		b.acct.release(int64(b.memMax), b.fileMax)
		b.memMax, b.fileMax = 0, 0
	}
	b.fileLen = 0
	if cap(b.mem) > keepMem {
		b.mem = nil
	}
	b.mem = b.mem[:0]
}
