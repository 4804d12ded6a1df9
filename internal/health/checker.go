package health

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/helios-lb/helios/internal/upstream"
)

// CheckPolicy configures active health checks.
type CheckPolicy struct {
	Path     string
	Interval time.Duration
	Timeout  time.Duration
	Fails    int
	Passes   int
	// Expect reports whether a status passes.
	Expect func(status int) bool
}

// Probe performs one check of addr and returns the status it got. The
// default probe is an HTTP GET of the policy's path.
type Probe func(ctx context.Context, addr string) (status int, err error)

// Checker runs active health checks against an upstream's backends: one
// goroutine per backend, each on its own jittered schedule, so checks run
// concurrently and never in lockstep across backends.
type Checker struct {
	policy   CheckPolicy
	addrs    []string
	trackers []*Tracker
	probe    Probe
	// OnResult, when set, is told every check result (for metrics).
	OnResult func(addr string, pass bool)
	// OnChange, when set, is told when a backend goes down or comes up.
	OnChange func(addr string, down bool, reason string)

	cancel context.CancelFunc
	wg     sync.WaitGroup
	client *http.Client
}

// NewChecker returns a checker for the backends at addrs with their
// trackers (same order). A nil probe means HTTP GET of p.Path.
func NewChecker(p CheckPolicy, addrs []string, trackers []*Tracker, probe Probe) *Checker {
	c := &Checker{policy: p, addrs: addrs, trackers: trackers, probe: probe}
	if c.probe == nil {
		c.client = &http.Client{
			Transport: &http.Transport{
				DialContext:         (&net.Dialer{Timeout: p.Timeout}).DialContext,
				MaxIdleConnsPerHost: 1,
				IdleConnTimeout:     2 * p.Interval,
			},
			// A redirect is an answer; its status decides.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
		c.probe = c.httpProbe
	}
	return c
}

func (c *Checker) httpProbe(ctx context.Context, addr string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+c.policy.Path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "helios-health-check")
	resp, err := c.client.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Start runs the checks until Stop. The first check of each backend comes
// within min(Interval, 1s) of Start, spread at random; later ones every
// Interval ±10 %.
func (c *Checker) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	for i := range c.addrs {
		c.wg.Add(1)
		go c.loop(ctx, i)
	}
}

// Stop ends the checks and waits for running ones to finish.
func (c *Checker) Stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	if c.client != nil {
		c.client.CloseIdleConnections()
	}
}

func (c *Checker) loop(ctx context.Context, i int) {
	defer c.wg.Done()
	first := time.Duration(rand.Int64N(int64(min(c.policy.Interval, time.Second)) + 1))
	timer := time.NewTimer(first)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		c.CheckOnce(ctx, i)
		jitter := time.Duration(rand.Int64N(int64(c.policy.Interval)/5+1)) - c.policy.Interval/10
		timer.Reset(c.policy.Interval + jitter)
	}
}

// CheckOnce checks backend i now and applies the result. A backend
// disabled through the admin API is in maintenance: it is not checked,
// and keeps the verdict it had until it is enabled again.
func (c *Checker) CheckOnce(ctx context.Context, i int) {
	if c.trackers[i].state.Admin() == upstream.AdminDisabled {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, c.policy.Timeout)
	status, err := c.probe(cctx, c.addrs[i])
	cancel()
	if ctx.Err() != nil {
		return // stopping: a cancelled check says nothing
	}
	pass := err == nil && c.policy.Expect(status)
	reason := ""
	switch {
	case err != nil:
		reason = err.Error()
	case !pass:
		reason = fmt.Sprintf("status %d", status)
	}
	if c.OnResult != nil {
		c.OnResult(c.addrs[i], pass)
	}
	changed, down := c.trackers[i].observeCheck(pass, reason, c.policy.Fails, c.policy.Passes)
	if changed && c.OnChange != nil {
		c.OnChange(c.addrs[i], down, reason)
	}
}

// Reset marks every tracker up and forgets check streaks; the server calls
// it for upstreams whose checks were turned off by a reload.
func Reset(trackers []*Tracker) {
	for _, t := range trackers {
		t.resetChecks()
	}
}
