package bodybuf

import (
	"fmt"
	"os"
	"sync/atomic"
)

// Budget bounds what buffers hold across a process: bytes in memory and
// bytes in temporary files, each under a cap that may change at any time
// (a reload). A buffer takes its share before it holds anything and gives
// it back when it is done. It also counts what response buffering did,
// for the metrics. Safe for concurrent use. A nil *Budget caps nothing
// and counts nothing; a zero cap lets nothing be held.
type Budget struct {
	memCap, fileCap atomic.Int64
	mem, file       atomic.Int64
	buffered, full  atomic.Uint64
	spilled         atomic.Uint64
}

// NewBudget returns a budget with the given caps.
func NewBudget(memory, file int64) *Budget {
	b := &Budget{}
	b.SetCaps(memory, file)
	return b
}

// SetCaps changes the caps. What is held already stays held; new takes
// see the new caps.
func (b *Budget) SetCaps(memory, file int64) {
	b.memCap.Store(memory)
	b.fileCap.Store(file)
}

// take adds n to v if that keeps it at most max.
func take(v *atomic.Int64, max, n int64) bool {
	for {
		cur := v.Load()
		if cur+n > max {
			return false
		}
		if v.CompareAndSwap(cur, cur+n) {
			return true
		}
	}
}

func (b *Budget) takeMem(n int64) bool {
	return b == nil || n <= 0 || take(&b.mem, b.memCap.Load(), n)
}

func (b *Budget) takeFile(n int64) bool {
	return b == nil || n <= 0 || take(&b.file, b.fileCap.Load(), n)
}

// takeFileUpTo takes up to n file bytes and returns how many it took.
func (b *Budget) takeFileUpTo(n int64) int64 {
	if b == nil {
		return n
	}
	return upTo(&b.file, b.fileCap.Load(), n)
}

// takeMemUpTo takes up to n bytes of memory and returns how many it
// took.
func (b *Budget) takeMemUpTo(n int64) int64 {
	if b == nil {
		return n
	}
	return upTo(&b.mem, b.memCap.Load(), n)
}

// upTo adds up to n to v without passing max, and returns how much it
// added.
func upTo(v *atomic.Int64, max, n int64) int64 {
	for {
		cur := v.Load()
		m := min(n, max-cur)
		if m <= 0 {
			return 0
		}
		if v.CompareAndSwap(cur, cur+m) {
			return m
		}
	}
}

func (b *Budget) give(mem, file int64) {
	if b != nil {
		b.mem.Add(-mem)
		b.file.Add(-file)
	}
}

// CountBuffered counts an answer that response buffering took over.
func (b *Budget) CountBuffered() {
	if b != nil {
		b.buffered.Add(1)
	}
}

// CountFull counts a time a cap (the answer's or the budget's) or a
// failed disk kept an answer from being buffered further.
func (b *Budget) CountFull() {
	if b != nil {
		b.full.Add(1)
	}
}

// BudgetStats is what a Budget holds and has counted.
type BudgetStats struct {
	// Memory and File are the bytes held (reserved) now.
	Memory, File int64
	// Buffered counts the answers response buffering took over; Full the
	// times a cap or the disk stopped it (the answer went on with
	// backpressure); Spilled the bytes written to temporary files.
	Buffered, Full, Spilled uint64
}

// Stats returns what b holds and has counted; zero for a nil b.
func (b *Budget) Stats() BudgetStats {
	if b == nil {
		return BudgetStats{}
	}
	return BudgetStats{Memory: b.mem.Load(), File: b.file.Load(),
		Buffered: b.buffered.Load(), Full: b.full.Load(), Spilled: b.spilled.Load()}
}

// Spool holds an answer between a backend that sends it faster than its
// client reads it and that client (response buffering): bytes go in at
// the back and come out at the front, in order. The front is in memory,
// the rest in an unlinked temporary file; bytes whose write to the file
// failed are kept in memory behind it (the tail), and nothing more goes
// to the file. What it may hold is reserved from a Budget first (Start,
// Grow) and given back by Close.
//
// A Spool is used by one goroutine, its owner, with one exception: the
// file is written on another (AppendFile), between BeginFile and
// EndFile, while the owner goes on reading what was written before. The
// zero value holds nothing and may not be written to before Start.
type Spool struct {
	budget  *Budget
	memMax  int
	fileMax int64
	// memRes and fileRes are what was reserved from the budget: memory
	// held at once, and bytes written to the file in all (its bytes are
	// not reused).
	memRes  int
	fileRes int64

	mem  []byte
	memR int
	f    *os.File
	// fileR..fileW is the part of the file still to read; writing
	// counts bytes on their way to it (BeginFile) that have not ended.
	fileR, fileW int64
	writing      int
	tail         []byte
	failed       bool
}

// Start readies s to hold an answer: up to memMax bytes in memory at
// once and fileMax bytes written to a file, within what b allows. For an
// answer of known length (want >= 0) it reserves all of it and reports
// false (reserving nothing) when that does not fit; for one of unknown
// length (want < 0) it reserves the memory part, when b allows, and
// the file part is taken with Grow as it is needed.
func (s *Spool) Start(memMax int, fileMax int64, b *Budget, want int64) bool {
	*s = Spool{budget: b, memMax: memMax, fileMax: fileMax, mem: s.mem[:0]}
	mem := int64(memMax)
	if want >= 0 {
		mem = min(mem, want)
		if want-mem > fileMax {
			return false
		}
	}
	if b.takeMem(mem) {
		s.memRes = int(mem)
	}
	if want >= 0 {
		file := want - int64(s.memRes)
		if file > fileMax || !b.takeFile(file) {
			b.give(int64(s.memRes), 0)
			s.memRes = 0
			return false
		}
		s.fileRes = file
	}
	return true
}

// Grow reserves up to n more bytes for the file part, within the
// answer's cap and the budget; it reports whether any were.
func (s *Spool) Grow(n int64) bool {
	n = min(n, s.fileMax-s.fileRes)
	if n <= 0 || s.failed {
		return false
	}
	n = s.budget.takeFileUpTo(n)
	s.fileRes += n
	return n > 0
}

// MemRoom returns how many more bytes PutMem takes now: none while
// anything waits in the file part or the tail (they come first).
func (s *Spool) MemRoom() int {
	if s.fileW > s.fileR || s.writing > 0 || len(s.tail) > 0 {
		return 0
	}
	return s.memRes - len(s.mem)
}

// FileRoom returns how many more bytes may be written to the file.
func (s *Spool) FileRoom() int64 {
	if s.failed {
		return 0
	}
	return s.fileRes - s.fileW - int64(s.writing)
}

// PutMem appends what fits of p in memory (MemRoom) and returns how much
// that was.
func (s *Spool) PutMem(p []byte) int {
	n := min(len(p), s.MemRoom())
	if n > 0 && cap(s.mem) < s.memRes {
		// Once, the room reserved: not a copy per doubling.
		s.mem = append(make([]byte, 0, s.memRes), s.mem...)
	}
	s.mem = append(s.mem, p[:n]...)
	return n
}

// BeginFile marks n more bytes as on their way to the file (gathered by
// the owner, then handed to AppendFile) and returns the file to give it
// (nil: AppendFile makes one). One write at a time.
func (s *Spool) BeginFile(n int) *os.File {
	s.writing += n
	return s.f
}

// AppendFile writes p at the end of f, making f first when it is nil (in
// dir, "" for the system's, unlinked at once). It returns the file and
// how much of p was written. It may block on the disk: run it off the
// Spool owner's goroutine, between BeginFile and EndFile.
func AppendFile(f *os.File, dir string, p []byte) (*os.File, int, error) {
	if f == nil {
		var err error
		if f, err = tempFile(dir); err != nil {
			return nil, 0, fmt.Errorf("buffering an answer: %w", err)
		}
	}
	n, err := f.Write(p)
	if err != nil {
		err = fmt.Errorf("buffering an answer: %w", err)
	}
	return f, n, err
}

// EndFile ends the write BeginFile began: p was handed to AppendFile,
// which returned f, n and err. What was not written stays in memory, in
// the tail, and nothing more goes to the file.
func (s *Spool) EndFile(f *os.File, p []byte, n int, err error) {
	s.writing -= len(p)
	if f != nil {
		s.f = f
	}
	s.fileW += int64(n)
	if s.budget != nil {
		s.budget.spilled.Add(uint64(n))
	}
	if err != nil || n < len(p) {
		s.failed = true
		s.tail = append(s.tail, p[n:]...)
	}
}

// Front returns the next bytes held, in order: from memory, from the
// file (read into buf), or from the tail; empty when nothing is there
// now (a file write may be under way). Advance consumes them.
func (s *Spool) Front(buf []byte) ([]byte, error) {
	switch {
	case s.memR < len(s.mem):
		return s.mem[s.memR:], nil
	case s.fileR < s.fileW:
		n, err := s.f.ReadAt(buf[:min(int64(len(buf)), s.fileW-s.fileR)], s.fileR)
		if n > 0 {
			err = nil // what was read goes first; an error comes back
		}
		return buf[:n], err
	case s.writing == 0:
		return s.tail, nil
	}
	return nil, nil
}

// Advance consumes n bytes of what Front returned.
func (s *Spool) Advance(n int) {
	switch {
	case s.memR < len(s.mem):
		s.memR += n
		if s.memR == len(s.mem) {
			s.mem, s.memR = s.mem[:0], 0
		}
	case s.fileR < s.fileW:
		s.fileR += int64(n)
	default:
		s.tail = s.tail[:copy(s.tail, s.tail[n:])]
	}
}

// Len returns how many bytes are held and not yet consumed, those being
// written included.
func (s *Spool) Len() int64 {
	return int64(len(s.mem)-s.memR) + s.fileW - s.fileR + int64(s.writing) + int64(len(s.tail))
}

// Writing reports whether a file write is under way.
func (s *Spool) Writing() bool { return s.writing > 0 }

// Close lets go of everything: the file is closed (not while a write is
// under way: call it after EndFile), memory beyond keepMem is dropped,
// and the reservations go back to the budget.
func (s *Spool) Close() {
	if s.f != nil {
		s.f.Close()
		s.f = nil
	}
	s.budget.give(int64(s.memRes), s.fileRes)
	mem := s.mem[:0]
	if cap(mem) > keepMem {
		mem = nil
	}
	*s = Spool{mem: mem}
}

// tempFile makes an unlinked temporary file in dir ("" for the
// system's), so that nothing is left behind by a crash.
func tempFile(dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, "helios-body-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name())
	return f, nil
}
