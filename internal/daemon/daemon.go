// Package daemon runs a Helios process's life around a server.Server: it
// takes over or binds the listening sockets, tells systemd when it is
// ready, reloading and stopping, pings the watchdog only while the event
// loops make progress, applies logging changes on reload, reopens the
// access log for logrotate, hands its sockets to a new binary on SIGUSR2,
// and drains on SIGTERM after an optional delay.
//
// Signals:
//
//	SIGHUP          reload the config file (RELOADING=1 ... READY=1)
//	SIGUSR1         reopen the access log file (after logrotate moved it)
//	SIGUSR2         binary upgrade: start the binary again with the
//	                sockets; when it is ready, drain and exit
//	SIGTERM, SIGINT drain and exit 0 (STOPPING=1); a second one exits now
package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/accesslog"
	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/logging"
	"github.com/helios-lb/helios/internal/metrics"
	"github.com/helios-lb/helios/internal/server"
	"github.com/helios-lb/helios/internal/systemd"
	"github.com/helios-lb/helios/internal/upgrade"
)

// Options configure Run. The zero value of each field is noted; the
// ones that reach the operating system default to the process's own.
type Options struct {
	// ConfigPath is the config file, re-read on reload. Empty: reloads
	// are refused (helios proxy has no file).
	ConfigPath string
	// Config is ConfigPath loaded and validated. Required.
	Config *config.Config
	// Build labels helios_build_info and the start log line.
	Build metrics.BuildInfo
	// ShutdownTimeout bounds a drain; 0: 30s.
	ShutdownTimeout time.Duration
	// ShutdownDelay is how long /readyz answers 503 while the listeners
	// still accept, before a drain starts (Kubernetes endpoints and load
	// balancers lag behind readiness). 0: none.
	ShutdownDelay time.Duration
	// PIDFile, when set, gets the pid once the process is ready (a new
	// process of an upgrade overwrites it); removed on exit if it still
	// names this process.
	PIDFile string
	// UpgradeTimeout bounds how long a new binary may take to be ready;
	// 0: upgrade.DefaultTimeout.
	UpgradeTimeout time.Duration
	// HealthWait bounds the wait for the first health round before ready
	// is reported; 0: 30s.
	HealthWait time.Duration
	// Stdout and Stderr receive the access log (when it says so) and the
	// process log. Nil: the process's.
	Stdout, Stderr io.Writer
	// Signals delivers the signals above. Nil: the process's own.
	Signals <-chan os.Signal
	// Notifier talks to systemd. Nil: from NOTIFY_SOCKET.
	Notifier *systemd.Notifier
	// Upgrader hands sockets over, and holds those handed to this
	// process. Nil: from the environment (upgrade.OSEnv).
	Upgrader *upgrade.Upgrader
	// Activated are the sockets systemd passed. Nil: read from
	// LISTEN_FDS (systemd.OSEnv).
	Activated systemd.Activated
	// Getenv reads WATCHDOG_USEC and WATCHDOG_PID. Nil: os.Getenv.
	Getenv func(string) string
	// OnReady, when set, is called with the server once ready has been
	// reported (tests).
	OnReady func(*server.Server)
}

// daemon is one Run.
type daemon struct {
	o       Options
	log     *logging.Process
	sd      *systemd.Notifier
	upg     *upgrade.Upgrader
	access  accesslog.Switch
	proc    *metrics.Process
	started time.Time

	mu        sync.Mutex // the access log sink and its config
	sink      *logging.AccessSink
	acfg      config.Logging
	accessSet bool
}

// Run serves until a signal says to stop, or ctx ends (a drain, like
// SIGTERM). It returns nil after a drain or a handover to a new binary,
// and an error when the server could not start.
func Run(ctx context.Context, o Options) error {
	if err := o.fill(); err != nil {
		return err
	}
	d := &daemon{o: o, sd: o.Notifier, upg: o.Upgrader, started: time.Now()}
	var err error
	if d.log, err = logging.NewProcess(o.Config.Logging, o.Stderr); err != nil {
		return err
	}
	defer d.log.Sync()
	for _, w := range o.Config.Warnings {
		d.log.Warn(w.String())
	}
	if err := d.applyAccess(o.Config.Logging); err != nil {
		return err
	}
	defer d.closeAccess()
	reg := prometheus.NewRegistry()
	if d.proc, err = metrics.NewProcess(reg, o.Build, d.access.Dropped, d.started); err != nil {
		return err
	}
	srv, err := server.New(o.Config, server.Options{
		Logger:     d.log.Logger,
		Recorder:   &d.access,
		Registry:   reg,
		ConfigPath: o.ConfigPath,
		Sockets:    handedOver{o.Upgrader, o.Activated},
		OnReload:   d.reloaded,
	})
	if err != nil {
		d.sd.Status("failed to start: " + err.Error())
		return err
	}
	srv.Start()
	for _, name := range o.Activated.Names() {
		d.log.Warn("systemd passed sockets that no listener is named for (FileDescriptorName= must be a listener's name, or admin); closing them",
			zap.String("name", name))
	}
	o.Activated.Close()
	d.waitHealth(ctx, srv)
	if err := d.becomeReady(srv); err != nil {
		shutdownNow(srv)
		return err
	}
	wctx, stopWatchdog := context.WithCancel(context.Background())
	defer stopWatchdog()
	d.startWatchdog(wctx, srv)
	if o.OnReady != nil {
		o.OnReady(srv)
	}
	return d.serve(ctx, srv, stopWatchdog)
}

// fill puts in the defaults for nil and zero options.
func (o *Options) fill() error {
	if o.Config == nil {
		return errors.New("daemon: Config is required")
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	if o.HealthWait <= 0 {
		o.HealthWait = 30 * time.Second
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Getenv == nil {
		o.Getenv = os.Getenv
	}
	if o.Signals == nil {
		ch := make(chan os.Signal, 8)
		signal.Notify(ch, syscall.SIGHUP, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGINT, syscall.SIGTERM)
		o.Signals = ch
	}
	var err error
	if o.Notifier == nil {
		if o.Notifier, err = systemd.NewNotifier(os.Getenv("NOTIFY_SOCKET")); err != nil {
			return err
		}
	}
	if o.Upgrader == nil {
		if o.Upgrader, err = upgrade.New(upgrade.OSEnv()); err != nil {
			return err
		}
	}
	o.Upgrader.Timeout = o.UpgradeTimeout
	if o.Activated == nil {
		if o.Activated, err = systemd.ListenFDs(systemd.OSEnv()); err != nil {
			return err
		}
	}
	return nil
}

// waitHealth waits for the first round of health checks, so that ready
// means /readyz tells the truth about every backend.
func (d *daemon) waitHealth(ctx context.Context, srv *server.Server) {
	wctx, cancel := context.WithTimeout(ctx, d.o.HealthWait)
	defer cancel()
	if !srv.WaitHealthChecked(wctx) {
		d.log.Warn("first round of health checks not done; reporting ready anyway", zap.Duration("waited", d.o.HealthWait))
	}
}

// becomeReady tells the process this one replaces (if any) and systemd
// that this one serves, and writes the PID file.
func (d *daemon) becomeReady(srv *server.Server) error {
	replacing := d.upg.HasParent()
	if err := d.upg.Ready(); err != nil {
		return fmt.Errorf("upgrade: %w", err)
	}
	if d.o.PIDFile != "" {
		if err := writePIDFile(d.o.PIDFile, os.Getpid()); err != nil {
			d.log.Error("writing the PID file", zap.String("file", d.o.PIDFile), zap.Error(err))
		}
	}
	// One line that says what is served where opens the log, as Caddy's
	// "Caddy proxying http://:8080 -> 127.0.0.1:9001" does (issue 18
	// item 7).
	line := "Helios " + srv.Summary()
	fields := []zap.Field{zap.String("config", d.o.ConfigPath), zap.String("version", d.o.Build.Version), zap.Int("pid", os.Getpid())}
	if replacing {
		// The old process hands MAINPID over; systemd already counts
		// the service as running.
		d.log.Info(line+" (upgraded: the old process drains and exits)", fields...)
		return nil
	}
	d.sd.Ready(serving(srv))
	d.log.Info(line, fields...)
	return nil
}

// serving is the status systemctl status shows while serving.
func serving(srv *server.Server) string {
	cfg := srv.Config()
	n := len(cfg.Listeners)
	names := make([]string, 0, n)
	for _, l := range cfg.Listeners {
		if a := srv.Addr(l.Name); a != nil {
			names = append(names, a.String())
		}
	}
	return "serving on " + strings.Join(names, ", ")
}

// startWatchdog pings systemd's watchdog while the event loops make
// progress, when WatchdogSec= is set.
func (d *daemon) startWatchdog(ctx context.Context, srv *server.Server) {
	every, on, err := systemd.WatchdogInterval(d.o.Getenv, os.Getpid())
	if err != nil {
		d.log.Warn("watchdog setting ignored", zap.Error(err))
	}
	if !on {
		return
	}
	w := &systemd.Watchdog{
		Notifier: d.sd,
		Interval: every,
		// Half an interval to answer keeps every ping within
		// WATCHDOG_USEC of the last.
		Healthy: func() bool { return !srv.LoopsStuck(every / 2) },
		OnSkip: func() {
			d.log.Error("an event loop has been busy with one batch of events too long; not pinging the watchdog", zap.Duration("longer_than", every/2))
		},
	}
	d.log.Info("watchdog on", zap.Duration("ping_every", every))
	go w.Run(ctx)
}

// serve handles signals until one ends the process.
func (d *daemon) serve(ctx context.Context, srv *server.Server, stopWatchdog func()) error {
	for {
		select {
		case <-ctx.Done():
			return d.stop(srv, "context ended")
		case sig := <-d.o.Signals:
			switch sig {
			case syscall.SIGHUP:
				d.reload(srv)
			case syscall.SIGUSR1:
				d.reopen()
			case syscall.SIGUSR2:
				if pid, ok := d.upgrade(ctx, srv); ok {
					stopWatchdog()
					return d.handOver(srv, pid)
				}
			case syscall.SIGINT, syscall.SIGTERM:
				return d.stop(srv, sig.String())
			}
		}
	}
}

// reload re-reads the config file, inside RELOADING=1 ... READY=1.
func (d *daemon) reload(srv *server.Server) {
	d.log.Info("reloading", zap.String("config", d.o.ConfigPath))
	d.sd.Reloading()
	problems, err := srv.ReloadFile() // logs a refusal itself
	if err != nil {
		why := err.Error()
		if len(problems) > 0 {
			why += ": " + problems[0]
		}
		d.sd.Ready("reload refused, previous configuration serving: " + why)
		return
	}
	d.sd.Ready(serving(srv))
}

// reloaded is told of every reload, by SIGHUP or the admin API: it counts
// it and applies the new logging settings.
func (d *daemon) reloaded(cfg *config.Config, err error) {
	now := time.Now()
	d.proc.Reloaded(err == nil, now)
	if err != nil {
		return
	}
	if err := d.log.Apply(cfg.Logging); err != nil {
		d.log.Error("logging settings not applied", zap.Error(err))
	}
	if err := d.applyAccess(cfg.Logging); err != nil {
		d.log.Error("access log settings not applied; the access log is unchanged", zap.Error(err))
	}
}

// applyAccess opens the access log cfg asks for, when it differs from
// the one in use, and swaps it in.
func (d *daemon) applyAccess(cfg config.Logging) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cfg.AccessLog == "" {
		cfg.AccessLog = config.AccessLogOff
	}
	if d.accessSet && cfg.AccessLog == d.acfg.AccessLog && cfg.AccessLineFormat() == d.acfg.AccessLineFormat() {
		return nil
	}
	sink, err := logging.OpenAccess(cfg, d.o.Stdout, d.o.Stderr)
	if err != nil {
		return err
	}
	var l *accesslog.Logger
	if sink != nil {
		f, err := accesslog.ParseFormat(sink.Format)
		if err != nil {
			sink.Close()
			return err
		}
		l = accesslog.New(sink.W, f)
	}
	old := d.sink
	d.sink, d.acfg, d.accessSet = sink, cfg, true
	d.access.Swap(l, time.Second, func(error) {
		if old != nil {
			old.Close()
		}
	})
	return nil
}

// closeAccess writes out and closes the access log at exit.
func (d *daemon) closeAccess() {
	done := make(chan struct{})
	d.access.Swap(nil, 0, func(error) { close(done) })
	<-done
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sink != nil {
		d.sink.Close()
		d.sink = nil
	}
}

// reopen opens the access log file again, for logrotate.
func (d *daemon) reopen() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sink == nil || d.sink.Reopen == nil {
		d.log.Info("SIGUSR1: no access log file to reopen")
		return
	}
	if err := d.sink.Reopen(); err != nil {
		d.log.Error("reopening the access log; lines go on to the old file", zap.String("file", d.acfg.AccessLog), zap.Error(err))
		return
	}
	d.log.Info("access log reopened", zap.String("file", d.acfg.AccessLog))
}

// upgrade starts the binary again with this process's sockets and waits
// until it is ready; it reports the new pid, or false when this process
// must go on serving.
func (d *daemon) upgrade(ctx context.Context, srv *server.Server) (int, bool) {
	d.log.Info("upgrade: starting a new process with this one's sockets", zap.String("binary", os.Args[0]))
	socks, err := srv.HandoffSockets()
	if err != nil {
		d.log.Error("upgrade failed; this process keeps serving", zap.Error(err))
		return 0, false
	}
	defer func() {
		for _, s := range socks {
			s.File.Close()
		}
	}()
	keyed := make([]upgrade.Socket, len(socks))
	for i, s := range socks {
		keyed[i] = upgrade.Socket{Key: socketKey(s.Admin, s.Address), File: s.File}
	}
	d.sd.Status("upgrading: waiting for the new process to be ready")
	pid, err := d.upg.Upgrade(ctx, keyed)
	if err != nil {
		d.log.Error("upgrade failed; this process keeps serving", zap.Error(err))
		d.sd.Status("upgrade failed, old process serving: " + err.Error())
		if d.o.PIDFile != "" {
			// For helios upgrade, which waits on the PID file.
			os.WriteFile(d.o.PIDFile+upgrade.FailedSuffix, []byte("upgrade failed: "+err.Error()+"\n"), 0o644)
		}
		return 0, false
	}
	return pid, true
}

// handOver makes the new process the service's main process and drains
// this one. It sends no STOPPING=1: with NotifyAccess=all systemd would
// take it for the service stopping.
func (d *daemon) handOver(srv *server.Server, pid int) error {
	d.sd.MainPID(pid, "upgraded: pid "+strconv.Itoa(pid)+" took over from pid "+strconv.Itoa(os.Getpid()))
	d.log.Info("upgrade: the new process serves; draining this one", zap.Int("new_pid", pid), zap.Duration("timeout", d.o.ShutdownTimeout))
	return d.drain(srv)
}

// stop drains after the shutdown delay: STOPPING=1, /readyz 503 while
// the listeners still accept, then stop accepting and finish what runs.
func (d *daemon) stop(srv *server.Server, why string) error {
	srv.BeginDrain() // before STOPPING=1: whoever sees it sees /readyz 503
	d.sd.Stopping()
	if d.o.ShutdownDelay > 0 {
		d.log.Info("shutting down: /readyz answers 503 while the listeners keep accepting",
			zap.String("signal", why), zap.Duration("delay", d.o.ShutdownDelay))
		t := time.NewTimer(d.o.ShutdownDelay)
		select {
		case <-t.C:
		case sig := <-d.o.Signals:
			t.Stop()
			if sig == syscall.SIGINT || sig == syscall.SIGTERM {
				d.log.Warn("second signal; exiting now", zap.String("signal", sig.String()))
				shutdownNow(srv)
				d.removePIDFile()
				return nil
			}
		}
	}
	d.log.Info("draining", zap.String("signal", why), zap.Duration("timeout", d.o.ShutdownTimeout))
	err := d.drain(srv)
	d.removePIDFile()
	return err
}

// drain shuts the server down within the shutdown timeout; a second
// SIGTERM or SIGINT cuts it short.
func (d *daemon) drain(srv *server.Server) error {
	ctx, cancel := context.WithTimeout(context.Background(), d.o.ShutdownTimeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- srv.Shutdown(ctx)
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				d.log.Warn("drain cut short; remaining connections closed", zap.Error(err))
			}
			d.log.Info("stopped")
			return nil
		case sig := <-d.o.Signals:
			if sig == syscall.SIGINT || sig == syscall.SIGTERM {
				d.log.Warn("second signal; exiting now", zap.String("signal", sig.String()))
				return nil
			}
		}
	}
}

// shutdownNow closes everything without waiting for requests.
func shutdownNow(srv *server.Server) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	srv.Shutdown(ctx)
}

func (d *daemon) removePIDFile() {
	if d.o.PIDFile == "" {
		return
	}
	if pid, err := ReadPIDFile(d.o.PIDFile); err == nil && pid == os.Getpid() {
		os.Remove(d.o.PIDFile)
	}
}

// socketKey names a socket handed over in an upgrade: its kind and the
// address configured for it.
func socketKey(admin bool, address string) string {
	if admin {
		return "admin:" + address
	}
	return "tcp:" + address
}

// handedOver is server.Sockets over an upgrade's and systemd's sockets:
// an upgrade's match by address, systemd's by listener name (admin for
// the admin listener).
type handedOver struct {
	upg *upgrade.Upgrader
	act systemd.Activated
}

func (h handedOver) Listener(name, address string) []*os.File {
	if fs := h.upg.Take(socketKey(false, address)); len(fs) > 0 {
		return fs
	}
	return h.act.Take(name)
}

func (h handedOver) Admin(address string) *os.File {
	fs := h.upg.Take(socketKey(true, address))
	if len(fs) == 0 {
		fs = h.act.Take("admin")
	}
	if len(fs) == 0 {
		return nil
	}
	for _, f := range fs[1:] {
		f.Close()
	}
	return fs[0]
}

// BuildInfo returns the build labels for version, with the VCS revision
// and Go version of the running binary.
func BuildInfo(version, revision string) metrics.BuildInfo {
	return metrics.BuildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
}
