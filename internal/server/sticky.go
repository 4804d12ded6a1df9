package server

import (
	"crypto/rand"
	"strings"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/proxy"
)

// newStickySecret returns the key of the sticky cookies of upstreams
// without a sticky.secret: made once per process, so that reloads keep
// every client on its backend.
func newStickySecret() []byte {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return b
}

// buildSticky returns the sticky sessions of the upstream uc; nil when
// it has none.
func (s *Server) buildSticky(uc config.Upstream) *proxy.Sticky {
	sc := uc.Sticky
	if sc == nil {
		return nil
	}
	secret := s.stickySecret
	if sc.Secret != "" {
		secret = []byte(sc.Secret)
	}
	sameSite := ""
	if sc.SameSite != "" {
		sameSite = strings.ToUpper(sc.SameSite[:1]) + sc.SameSite[1:] // lax -> Lax, as browsers write it
	}
	return proxy.NewSticky(uc.Name, proxy.StickyOptions{
		Cookie:   sc.Cookie,
		Path:     sc.Path,
		MaxAge:   sc.TTL.D(),
		Secure:   sc.Secure,
		HTTPOnly: sc.HTTPOnlySet(),
		SameSite: sameSite,
		Secret:   secret,
	})
}
