package logging

import (
	"io"
	"slices"
	"sync/atomic"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/helios-lb/helios/internal/config"
)

// Process is the process log, whose level and format a reload can change
// (Apply). Loggers derived from it with With or Named follow the change.
type Process struct {
	*zap.Logger
	w    io.Writer
	root *atomic.Pointer[zapcore.Core]
}

// NewProcess returns the process log for cfg, writing to w.
func NewProcess(cfg config.Logging, w io.Writer) (*Process, error) {
	core, err := newCore(cfg, w)
	if err != nil {
		return nil, err
	}
	root := &atomic.Pointer[zapcore.Core]{}
	root.Store(&core)
	return &Process{Logger: zap.New(&switchCore{root: root}), w: w, root: root}, nil
}

// Apply switches the log to cfg's level and format. On an error nothing
// changes.
func (p *Process) Apply(cfg config.Logging) error {
	core, err := newCore(cfg, p.w)
	if err != nil {
		return err
	}
	p.root.Store(&core)
	return nil
}

// newCore is New's core.
func newCore(cfg config.Logging, w io.Writer) (zapcore.Core, error) {
	l, err := New(cfg, w)
	if err != nil {
		return nil, err
	}
	return l.Core(), nil
}

// switchCore is a zapcore.Core whose underlying core can be replaced
// while loggers made from it live on; the fields added with With are
// kept and applied to whichever core is current.
type switchCore struct {
	root   *atomic.Pointer[zapcore.Core]
	fields []zapcore.Field
}

func (c *switchCore) core() zapcore.Core { return *c.root.Load() }

func (c *switchCore) Enabled(l zapcore.Level) bool { return c.core().Enabled(l) }

func (c *switchCore) With(fs []zapcore.Field) zapcore.Core {
	return &switchCore{root: c.root, fields: append(slices.Clip(c.fields), fs...)}
}

func (c *switchCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write encodes through the current core. The process log is not on the
// request path, so re-adding the With fields per entry is affordable.
func (c *switchCore) Write(e zapcore.Entry, fs []zapcore.Field) error {
	core := c.core()
	if len(c.fields) > 0 {
		core = core.With(c.fields)
	}
	return core.Write(e, fs)
}

func (c *switchCore) Sync() error { return c.core().Sync() }
