package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Options tune a Watcher. Every duration must be more than 0.
type Options struct {
	// Every is the time between two lookups that worked.
	Every time.Duration
	// Min is the shortest time between two lookups: a TTL shorter than
	// Every brings the next lookup forward, never below Min; after a
	// failure the next try comes after Min, then twice as long after each
	// failure in a row, up to Every.
	Min time.Duration
	// Timeout bounds one lookup.
	Timeout time.Duration
	// AllowEmpty takes an answer with no backends (ErrNoRecords) as an
	// empty set; without it such an answer is a failure, and the last
	// good set stays.
	AllowEmpty bool
	// OnError, when set, is told of every failed lookup; repeated says
	// the previous lookup failed with the same message (for logging
	// once).
	OnError func(err error, repeated bool)
	// OnRecover, when set, is told when a lookup works after a failed
	// one.
	OnRecover func()
}

// Status is what a Watcher knows, for the admin API.
type Status struct {
	// Source names the source.
	Source string
	// Good says a lookup has worked: Targets is the last good set.
	Good bool
	// Targets is the last good set; nil before the first good lookup.
	Targets []Target
	// LastLookup and LastChange are when the last lookup ended and when
	// the set last changed; zero when neither happened.
	LastLookup, LastChange time.Time
	// LastError is the last lookup's error; "" when it worked.
	LastError string
	// Errors counts failed lookups.
	Errors uint64
}

// Watcher looks a source up again and again on its own goroutine and
// keeps the last good answer. Its methods are safe for concurrent use.
type Watcher struct {
	src  Source
	opts Options

	mu       sync.Mutex
	st       Status
	failures int           // failed lookups in a row
	next     time.Duration // wait before the next lookup
	notify   func()
	cancel   context.CancelFunc
	done     chan struct{}
	// fetching serialises lookups: Refresh from the caller and the
	// goroutine's never overlap (a File remembers what it read).
	fetching sync.Mutex
}

// NewWatcher returns a watcher of src. Nothing is looked up until Refresh
// or Start.
func NewWatcher(src Source, o Options) *Watcher {
	return &Watcher{src: src, opts: o, st: Status{Source: src.String()}}
}

// String names the watched source.
func (w *Watcher) String() string { return w.st.Source }

// Targets returns the last good set, and whether there is one.
func (w *Watcher) Targets() ([]Target, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st.Targets, w.st.Good
}

// Status returns what the watcher knows.
func (w *Watcher) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.st
}

// SetNotify makes f the function told, on the watcher's goroutine and
// without any lock held, that the set changed (Targets has the new one).
// Nil tells nobody.
func (w *Watcher) SetNotify(f func()) {
	w.mu.Lock()
	w.notify = f
	w.mu.Unlock()
}

// Refresh looks the source up now, within the watcher's timeout, and
// applies the answer. It reports whether the set changed, and the error
// when the lookup failed (the set then stays). It tells no one of the
// change: the caller reads Targets.
func (w *Watcher) Refresh(ctx context.Context) (changed bool, err error) {
	w.fetching.Lock()
	defer w.fetching.Unlock()
	fctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	ans, err := w.src.Fetch(fctx)
	cancel()
	if err != nil && ctx.Err() != nil {
		return false, ctx.Err() // stopping: a cut-short lookup says nothing
	}
	if errors.Is(err, ErrNoRecords) && w.opts.AllowEmpty {
		ans, err = Answer{}, nil
	}
	if err == nil && len(ans.Targets) == 0 && !w.opts.AllowEmpty {
		err = fmt.Errorf("%s: %w", w.src, ErrNoRecords)
	}
	if errors.Is(err, ErrNoRecords) {
		err = fmt.Errorf("%w: an empty answer keeps the last good set (allow_empty: true takes it as no backends)", err)
	}
	if errors.Is(err, errUnchanged) {
		w.mu.Lock()
		w.next = w.opts.Every
		w.mu.Unlock()
		return false, nil
	}

	w.mu.Lock()
	w.st.LastLookup = time.Now()
	if err != nil {
		w.st.Errors++
		w.failures++
		repeated := w.st.LastError == err.Error()
		w.st.LastError = err.Error()
		w.next = min(w.opts.Every, w.opts.Min<<min(w.failures-1, 20))
		w.mu.Unlock()
		if w.opts.OnError != nil {
			w.opts.OnError(err, repeated)
		}
		return false, err
	}
	recovered := w.failures > 0
	w.failures = 0
	w.st.LastError = ""
	w.next = w.opts.Every
	if ans.TTL > 0 && ans.TTL < w.next {
		w.next = ans.TTL
	}
	w.next = max(w.next, w.opts.Min)
	changed = !w.st.Good || !slices.Equal(w.st.Targets, ans.Targets)
	if changed {
		w.st.Good, w.st.Targets, w.st.LastChange = true, ans.Targets, w.st.LastLookup
	}
	w.mu.Unlock()
	if recovered && w.opts.OnRecover != nil {
		w.opts.OnRecover()
	}
	return changed, nil
}

// Start runs lookups on a goroutine until Stop: the first at once unless
// Refresh has run, then as Options say. Each change of the set is told to
// the SetNotify function. Start after Start does nothing.
func (w *Watcher) Start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go w.run(ctx, w.next, w.done)
}

// Stop ends the lookups and waits for the goroutine to end. The last good
// set stays readable. Stop before Start, or twice, does nothing.
func (w *Watcher) Stop() {
	w.mu.Lock()
	cancel, done := w.cancel, w.done
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (w *Watcher) run(ctx context.Context, wait time.Duration, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		changed, _ := w.Refresh(ctx)
		if ctx.Err() != nil {
			return
		}
		w.mu.Lock()
		notify, next := w.notify, w.next
		w.mu.Unlock()
		if changed && notify != nil {
			notify()
		}
		t.Reset(next)
	}
}
