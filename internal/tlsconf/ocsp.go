package tlsconf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/crypto/ocsp"
)

// OCSP stapling: a certificate that names an OCSP responder (in its
// Authority Information Access) gets a goroutine that fetches a signed
// "still good" from the responder and hands it to clients in the
// handshake, so they need not ask the CA themselves. The fetch never runs
// on a handshake: a handshake serves whatever staple is there, or none. An
// unreachable responder only means no staple.
//
// The response is parsed and its signature checked with
// golang.org/x/crypto/ocsp (the Go team's implementation of RFC 6960)
// rather than hand-written ASN.1.

// The OCSP schedule.
const (
	// stapleRetryMin is the first wait after a failed fetch; it doubles
	// up to stapleRetryMax.
	stapleRetryMin = time.Minute
	stapleRetryMax = time.Hour
	// stapleNoNextUpdate is the refresh interval of a response without a
	// nextUpdate (the responder always has newer information).
	stapleNoNextUpdate = time.Hour
	// stapleMinRefresh keeps a responder whose responses are about to
	// expire from being asked in a tight loop.
	stapleMinRefresh = time.Minute
	// maxOCSPResponse bounds a responder's answer (they are a few KiB).
	maxOCSPResponse = 1 << 20
)

// errNotGood is a response that says anything but "good".
var errNotGood = errors.New("OCSP status is not good")

// startStaplers starts fetching staples for the certificates of set that
// name a responder and whose issuer is in their chain, until ctx ends.
// p.mu is held.
func (p *Provider) startStaplers(ctx context.Context, set *certSet) {
	for _, e := range set.entries {
		if len(e.leaf.OCSPServer) == 0 || e.issuer == nil {
			continue
		}
		p.wg.Add(1)
		go p.staple(ctx, e)
	}
}

// staple keeps e's staple fresh: it fetches a response at once (or, with
// a staple carried over from a reload, halfway through that staple's
// validity), then again halfway through each response's validity, and
// after a failure with backoff, dropping a staple once it expires.
func (p *Provider) staple(ctx context.Context, e *entry) {
	defer p.wg.Done()
	var wait time.Duration
	if s := e.served.Load(); s.stapled() {
		wait = refreshIn(s.thisUpdate, s.nextUpdate, p.env.now())
	}
	failures := 0
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		resp, der, err := p.fetchOCSP(ctx, e)
		if ctx.Err() != nil {
			return
		}
		now := p.env.now()
		var next time.Time
		if err == nil {
			failures = 0
			c := *e.base
			c.OCSPStaple = der
			e.served.Store(&served{cert: &c, thisUpdate: resp.ThisUpdate, nextUpdate: resp.NextUpdate})
			next = resp.NextUpdate
			wait = refreshIn(resp.ThisUpdate, resp.NextUpdate, now)
		} else {
			failures++
			wait = min(stapleRetryMin<<min(failures-1, 10), stapleRetryMax)
			if s := e.served.Load(); s.stapled() && !s.nextUpdate.IsZero() {
				if !now.Before(s.nextUpdate) {
					e.served.Store(&served{cert: e.base}) // expired: serve none
				} else {
					wait = min(wait, s.nextUpdate.Sub(now))
				}
			}
		}
		if p.env.OnStaple != nil {
			p.env.OnStaple(e.file, next, err)
		}
	}
}

// refreshIn returns how long to wait before fetching again a response
// valid from this to next: until halfway, at least stapleMinRefresh.
func refreshIn(this, next, now time.Time) time.Duration {
	if next.IsZero() {
		return stapleNoNextUpdate
	}
	half := this.Add(next.Sub(this) / 2)
	return max(half.Sub(now), stapleMinRefresh)
}

// fetchOCSP asks e's responder about e and returns the response, checked
// (signed by e's issuer or a responder it delegated to, for e's serial,
// status good, not expired), and its DER bytes for the staple.
func (p *Provider) fetchOCSP(ctx context.Context, e *entry) (*ocsp.Response, []byte, error) {
	reqDER, err := ocsp.CreateRequest(e.leaf, e.issuer, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("building the OCSP request: %w", err)
	}
	url := e.leaf.OCSPServer[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(reqDER))
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder %q: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/ocsp-request")
	req.Header.Set("Accept", "application/ocsp-response")
	res, err := p.env.HTTPClient.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("OCSP responder %q answered %s", url, res.Status)
	}
	der, err := io.ReadAll(io.LimitReader(res.Body, maxOCSPResponse))
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder %q: reading the answer: %w", url, err)
	}
	resp, err := ocsp.ParseResponseForCert(der, e.leaf, e.issuer)
	if err != nil {
		return nil, nil, fmt.Errorf("OCSP responder %q: %w", url, err)
	}
	if resp.Status != ocsp.Good {
		return nil, nil, fmt.Errorf("%w: %s", errNotGood, statusName(resp.Status))
	}
	if !resp.NextUpdate.IsZero() && !p.env.now().Before(resp.NextUpdate) {
		return nil, nil, fmt.Errorf("OCSP responder %q: the response expired at %s", url, resp.NextUpdate.UTC().Format(time.RFC3339))
	}
	return resp, der, nil
}

func statusName(s int) string {
	switch s {
	case ocsp.Good:
		return "good"
	case ocsp.Revoked:
		return "revoked"
	case ocsp.Unknown:
		return "unknown"
	}
	return fmt.Sprintf("status %d", s)
}

// carryStaples gives the certificates of next that were also in prev
// (the same leaf and issuer) prev's staple while it is valid at now, so a
// reload does not leave them unstapled until the next fetch.
func carryStaples(prev, next *certSet, now time.Time) {
	byPrint := make(map[[32]byte]*entry, len(prev.entries))
	for _, e := range prev.entries {
		byPrint[e.fingerprint] = e
	}
	for _, e := range next.entries {
		old := byPrint[e.fingerprint]
		if old == nil || e.issuer == nil || old.issuer == nil || !bytes.Equal(old.issuer.Raw, e.issuer.Raw) {
			continue
		}
		if s := old.served.Load(); s.stapled() && (s.nextUpdate.IsZero() || now.Before(s.nextUpdate)) {
			c := *e.base
			c.OCSPStaple = s.cert.OCSPStaple
			e.served.Store(&served{cert: &c, thisUpdate: s.thisUpdate, nextUpdate: s.nextUpdate})
		}
	}
}
