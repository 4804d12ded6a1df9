package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/wire"
)

// ForwardAuth asks an authentication service about each of a route's
// requests, as nginx's auth_request and Traefik's and Caddy's
// forward_auth do: a GET to URL with the request's header fields (and
// X-Forwarded-Method, -Proto, -Host, -Uri and -For saying what the
// request is), made off the loop. A 2xx answer lets the request through,
// with the fields CopyHeaders names copied from the answer onto it
// (replacing any the client sent); any other answer is the client's, as
// the service sent it.
type ForwardAuth struct {
	// URL is the service's address (http or https).
	URL string
	// CopyHeaders lists the fields copied from a 2xx answer.
	CopyHeaders []string
	// Timeout bounds each subrequest, its answer's body included.
	Timeout time.Duration

	copy   [][]byte
	client *http.Client
	slots  chan struct{}
}

// maxAuthBody bounds the body of an authentication service's answer
// passed on to a client; the rest is dropped.
const maxAuthBody = 64 << 10

// maxAuthInFlight bounds the subrequests of one route in flight at once;
// a request beyond it is answered 503.
const maxAuthInFlight = 256

// NewForwardAuth returns forward authentication against url.
func NewForwardAuth(url string, copyHeaders []string, timeout time.Duration) *ForwardAuth {
	fa := &ForwardAuth{URL: url, CopyHeaders: copyHeaders, Timeout: timeout, slots: make(chan struct{}, maxAuthInFlight)}
	for _, h := range copyHeaders {
		fa.copy = append(fa.copy, []byte(h))
	}
	fa.client = &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: timeout}).DialContext,
			ResponseHeaderTimeout: timeout,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			DisableCompression:    true,
		},
		// A redirect is the client's to follow (to a login page).
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return fa
}

// CloseIdle closes the service's idle connections (the route is gone).
func (fa *ForwardAuth) CloseIdle() { fa.client.CloseIdleConnections() }

// authAnswer is an authentication service's answer.
type authAnswer struct {
	status int
	header httpmsg.Header
	body   []byte
}

// forwardAuth asks the service about the request, off the loop.
func (f *flow) forwardAuth(fa *ForwardAuth) wire.Action {
	select {
	case fa.slots <- struct{}{}:
	default:
		return f.answer(503, textHeader, bodyAuthBusy)
	}
	req, err := fa.request(f.ex)
	if err != nil {
		<-fa.slots
		return f.answer(502, textHeader, bodyAuthFailed)
	}
	j := &offLoop{stage: stageDone}
	wake := f.ex.Waker()
	go func() {
		defer func() { <-fa.slots }()
		j.answer, j.err = fa.ask(req)
		j.done.Store(true)
		wake()
	}()
	// The client's bound is the service's, and a little more.
	return f.waitFor(j, fa.Timeout+time.Second)
}

// request makes the subrequest for ex, copying what it needs of ex.
func (fa *ForwardAuth) request(ex wire.Exchange) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodGet, fa.URL, nil)
	if err != nil {
		return nil, err
	}
	r := ex.Request()
	for i := range r.Header.Fields {
		f := &r.Header.Fields[i]
		if f.Drop {
			continue
		}
		switch f.Kind {
		case httpmsg.KindHost, httpmsg.KindContentLength, httpmsg.KindTransferEncoding, httpmsg.KindConnection,
			httpmsg.KindKeepAlive, httpmsg.KindProxy, httpmsg.KindTE, httpmsg.KindUpgrade, httpmsg.KindExpect,
			httpmsg.KindXForwardedFor, httpmsg.KindXForwardedProto, httpmsg.KindXForwardedHost, httpmsg.KindForwarded, httpmsg.KindXRealIP:
			continue
		}
		req.Header.Add(string(f.Name), string(f.Value))
	}
	req.Header.Set("X-Forwarded-Method", string(r.Method))
	req.Header.Set("X-Forwarded-Proto", string(r.Scheme))
	req.Header.Set("X-Forwarded-Host", string(r.Authority))
	req.Header.Set("X-Forwarded-Uri", string(r.Target))
	req.Header.Set("X-Forwarded-For", ex.ClientAddr().String())
	return req, nil
}

// ask sends the subrequest and reads the answer (off the loop).
func (fa *ForwardAuth) ask(req *http.Request) (*authAnswer, error) {
	ctx, cancel := context.WithTimeout(context.Background(), fa.Timeout)
	defer cancel()
	res, err := fa.client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	a := &authAnswer{status: res.StatusCode}
	if a.status < 200 || a.status > 599 {
		return nil, errors.New("the authentication service answered with an interim status")
	}
	if a.status/100 != 2 {
		if a.body, err = io.ReadAll(io.LimitReader(res.Body, maxAuthBody)); err != nil {
			return nil, err
		}
	}
	for name, values := range res.Header {
		k := httpmsg.Classify([]byte(name))
		if k.HopByHop() || k == httpmsg.KindContentLength || k == httpmsg.KindTrailer {
			continue
		}
		for _, v := range values {
			a.header.Add([]byte(name), []byte(v))
		}
	}
	return a, nil
}

// forwardAuthDone acts on the service's answer.
func (f *flow) forwardAuthDone(rt *Route, j *offLoop) wire.Action {
	if err := j.err; err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return f.answer(504, textHeader, bodyAuthTimeout)
		}
		return f.answer(502, textHeader, bodyAuthFailed)
	}
	a := j.answer
	if a.status/100 != 2 {
		return f.answer(a.status, &a.header, a.body)
	}
	h := &f.ex.Request().Header
	for _, name := range rt.Policy.ForwardAuth.copy {
		h.Del(name)
		for i := range a.header.Fields {
			if fl := &a.header.Fields[i]; httpmsg.EqualFoldBytes(fl.Name, name) {
				h.Add(name, fl.Value)
			}
		}
	}
	return f.admit(rt, stageDone)
}
