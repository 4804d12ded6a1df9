package proxy

import (
	"strconv"

	"github.com/helios-lb/helios/internal/httpmsg"
	"github.com/helios-lb/helios/internal/rules"
	"github.com/helios-lb/helios/internal/wire"
)

var redirectBody = []byte("308 Permanent Redirect: this host is served over HTTPS\n")

// httpsRedirect answers a cleartext request (its scheme, as the engine
// found it, is http) with 308 to the same host, path and query over
// HTTPS, when its listener says redirect_https (to the listener's HTTPS
// port) or its host's certificate comes from ACME (to the port of the
// listener that serves it), unless rt (nil when no route matched) serves
// cleartext too. ok is false when it does not apply. One mechanism for
// both: a route's https_redirect: false opts out of either.
func (f *flow) httpsRedirect(ex wire.Exchange, rt *Route) (wire.Action, bool) {
	if rt != nil && rt.NoHTTPSRedirect || httpmsg.EqualFold(ex.Request().Scheme, "https") {
		return 0, false
	}
	port := 0
	if l := ex.Listener(); l != nil && l.RedirectHTTPS {
		port = l.HTTPSPort
		if port == 0 {
			port = 443
		}
	} else if a := f.g.ACME; a != nil {
		port = a.HTTPSPort(ex.Host())
	}
	if port == 0 {
		return 0, false
	}
	if f.redirect == nil {
		f.redirect = new(redirectHead)
	}
	rd := f.redirect
	loc := append(rd.location[:0], "https://"...)
	loc = append(loc, ex.Host()...)
	if port != 443 {
		loc = append(loc, ':')
		loc = strconv.AppendInt(loc, int64(port), 10)
	}
	loc = append(loc, ex.Path()...)
	if q := ex.Query(); len(q) > 0 {
		loc = append(loc, '?')
		loc = append(loc, q...)
	}
	rd.location = loc
	h := &rd.header
	h.Reset()
	h.Add(locationName, loc)
	h.Add(contentTypeName, textPlainValue)
	f.rec.Route = rt
	return f.answer(308, h, redirectBody), true
}

// redirectHead is the head of a redirect: its Location and its fields.
type redirectHead struct {
	location []byte
	header   httpmsg.Header
}

// redirectTo answers with a route's redirect: its status, and Location
// rendered from the request.
func (f *flow) redirectTo(rd *rules.Redirect) wire.Action {
	if f.redirect == nil {
		f.redirect = new(redirectHead)
	}
	h := &f.redirect.header
	h.Reset()
	h.Add(locationName, rd.Location(&f.pol.vars, f.ex))
	return f.answer(rd.Status(), h, nil)
}
