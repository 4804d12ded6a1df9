package logging

import (
	"os"
	"sync"
)

// reopenable is a file appended to that can be opened again by its path:
// logrotate renames the file and sends SIGUSR1, and lines go on to a new
// file of the old name (nginx's USR1). Writes come from the access log's
// writer goroutine; Reopen from the signal handler.
type reopenable struct {
	path string
	mu   sync.Mutex
	f    *os.File
}

func openAppend(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

func openReopenable(path string) (*reopenable, error) {
	f, err := openAppend(path)
	if err != nil {
		return nil, err
	}
	return &reopenable{path: path, f: f}, nil
}

func (r *reopenable) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Write(p)
}

// Reopen opens the path again and writes there from now on; on an error
// the old file is kept.
func (r *reopenable) Reopen() error {
	f, err := openAppend(r.path)
	if err != nil {
		return err
	}
	r.mu.Lock()
	old := r.f
	r.f = f
	r.mu.Unlock()
	return old.Close()
}

func (r *reopenable) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.f.Close()
}
