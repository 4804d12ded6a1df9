// Package logging builds Helios's zap loggers: the process log and the
// access log.
package logging

import (
	"fmt"
	"io"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/helios-lb/helios/internal/config"
)

// New returns the process logger for cfg, writing to w (stderr in the
// daemon, where systemd's journal or docker logs pick it up).
func New(cfg config.Logging, w io.Writer) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(cfg.Level)
	if err != nil {
		return nil, fmt.Errorf("logging.level: %w", err)
	}
	enc, err := encoder(cfg.Format, zapcore.StringDurationEncoder)
	if err != nil {
		return nil, err
	}
	core := zapcore.NewCore(enc, zapcore.Lock(zapcore.AddSync(w)), level)
	return zap.New(core), nil
}

// encoder builds the encoder for format; durations are strings ("30s") in
// the process log and seconds in the access log, where they are summed and
// compared.
func encoder(format string, dur zapcore.DurationEncoder) (zapcore.Encoder, error) {
	ec := zap.NewProductionEncoderConfig()
	ec.TimeKey = "time"
	ec.EncodeTime = zapcore.ISO8601TimeEncoder
	ec.EncodeDuration = dur
	switch format {
	case "", "json":
		return zapcore.NewJSONEncoder(ec), nil
	case "console":
		ec.EncodeLevel = zapcore.CapitalLevelEncoder
		return zapcore.NewConsoleEncoder(ec), nil
	}
	return nil, fmt.Errorf("logging.format: %q is not a format (json, console)", format)
}

// AccessSink is where access log lines go: a writer, the format named in
// the config, how to close it and, for a file, how to open it again.
type AccessSink struct {
	W      io.Writer
	Format string
	Close  func() error
	// Reopen opens the file again by its path, after logrotate moved it
	// (SIGUSR1). Nil for stdout and stderr.
	Reopen func() error
}

// OpenAccess opens the access log destination named by cfg.AccessLog:
// "stdout", "stderr" or a file path (appended to, created 0640). It
// returns nil when the access log is off. The caller buffers (package
// accesslog does).
func OpenAccess(cfg config.Logging, stdout, stderr io.Writer) (*AccessSink, error) {
	sink := &AccessSink{Format: cfg.AccessLineFormat(), Close: func() error { return nil }}
	switch cfg.AccessLog {
	case "", config.AccessLogOff:
		return nil, nil
	case config.AccessLogStdout:
		sink.W = stdout
	case config.AccessLogStderr:
		sink.W = stderr
	default:
		f, err := openReopenable(cfg.AccessLog)
		if err != nil {
			return nil, fmt.Errorf("logging.access_log: %w", err)
		}
		sink.W, sink.Close, sink.Reopen = f, f.Close, f.Reopen
	}
	switch sink.Format {
	case "json", "console", "combined":
	default:
		sink.Close()
		return nil, fmt.Errorf("logging.access_format: %q is not an access log format (json, console, combined)", sink.Format)
	}
	return sink, nil
}
