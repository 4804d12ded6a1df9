// Package logging builds Helios's zap loggers: the process log and the
// access log.
package logging

import (
	"fmt"
	"io"
	"os"

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
// the config, and how to close it.
type AccessSink struct {
	W      io.Writer
	Format string
	Close  func() error
}

// OpenAccess opens the access log destination named by cfg.AccessLog:
// "stdout", "stderr" or a file path (appended to, created 0640). It
// returns nil when the access log is off. The caller buffers (package
// accesslog does).
func OpenAccess(cfg config.Logging, stdout, stderr io.Writer) (*AccessSink, error) {
	sink := &AccessSink{Format: cfg.Format, Close: func() error { return nil }}
	switch cfg.AccessLog {
	case "", config.AccessLogOff:
		return nil, nil
	case config.AccessLogStdout:
		sink.W = stdout
	case config.AccessLogStderr:
		sink.W = stderr
	default:
		f, err := os.OpenFile(cfg.AccessLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
		if err != nil {
			return nil, fmt.Errorf("logging.access_log: %w", err)
		}
		sink.W = f
		sink.Close = f.Close
	}
	if sink.Format != "" && sink.Format != "json" && sink.Format != "console" {
		return nil, fmt.Errorf("logging.format: %q is not a format (json, console)", sink.Format)
	}
	return sink, nil
}
