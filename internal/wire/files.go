package wire

import "github.com/helios-lb/helios/internal/httpmsg"

// Files answers requests from files, on the engine's own loop
// (ActServeFile): it plans an answer — status, fields, and which byte
// range of which open file — without writing anything, and the engine
// sends it its way (sendfile(2) for HTTP/1.1 in the clear; reads for TLS
// and HTTP/2), with the backpressure of any answer. internal/static
// implements it.
type Files interface {
	// PlanFile fills a with the answer to ex, for loop (planners keep
	// state per loop, such as a shard of an open-file cache). It never
	// blocks for long (a cache miss opens and stats a file) and keeps
	// none of ex's slices.
	PlanFile(loop int, ex Exchange, a *FileAnswer)
}

// FileAnswer is an answer planned by Files. The engine keeps one per
// connection and reuses it: its buffers grow to fit, then stay.
//
// The engine sends Status with Header (it adds Date and its framing;
// Header says what GET would get, Content-Length included, also for
// HEAD), then Body, then Length bytes of File from Offset. For HEAD, and
// wherever there is nothing to send, Body and File are nil.
type FileAnswer struct {
	// Status is the status code, e.g. 200, 206, 304, 404.
	Status int
	// Header holds the answer's fields; its slices point into Scratch
	// or the planner's cache, valid until the next plan.
	Header httpmsg.Header
	// Body is a small fixed body (an error text, a redirect's link);
	// nil when there is none.
	Body []byte
	// File is the open file to send from; nil when none. When set, the
	// engine calls File.Release exactly once, when it has finished
	// sending or has given up.
	File AnswerFile
	// Offset and Length are the byte range of File to send; both 0 when
	// File is nil.
	Offset, Length int64
	// Scratch is memory the planner keeps from one plan to the next in
	// this FileAnswer; the engine never touches it.
	Scratch [3][]byte
}

// AnswerFile is an open file a FileAnswer's bytes come from.
type AnswerFile interface {
	// Fd returns the file's descriptor, for sendfile(2).
	Fd() int
	// ReadAt reads the file at off (io.ReaderAt).
	ReadAt(p []byte, off int64) (int, error)
	// Bytes returns the whole file when the planner holds it in memory
	// (a small file in its cache), nil otherwise. The engine sends a
	// range of it with the head in one write rather than with
	// sendfile(2) after the head: one system call instead of two. The
	// slice never changes; it is valid until Release.
	Bytes() []byte
	// Release ends the answer's use of the file.
	Release()
}
