package tlsconf

import (
	"crypto/rand"
	"time"
)

// Session tickets let a returning client skip the full handshake: Helios
// encrypts the session's secrets into a ticket the client keeps. The key
// that encrypts them is the Provider's, on the tls.Config every socket and
// event loop of the listener shares, so a ticket issued on one socket
// resumes on any other. A new key takes over every Env.TicketRotation and
// the last Env.TicketKeys are kept to decrypt tickets already issued: a
// stolen key exposes a few hours of sessions, not the process's life
// (crypto/tls's own automatic keys would live seven days).
//
// Keys are per listener, not shared across listeners: a listener that
// asks for client certificates must not resume a session established on
// one that does not ask, or trusts other CAs. (crypto/tls checks both on
// resumption too; separate keys make it impossible rather than checked.)

// rotate runs RotateTicketKeys every Env.TicketRotation until Close.
func (p *Provider) rotate() {
	defer p.wg.Done()
	t := time.NewTicker(p.env.TicketRotation)
	defer t.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-t.C:
			p.RotateTicketKeys()
		}
	}
}

// RotateTicketKeys makes a new session ticket key the one that encrypts
// new tickets, keeping the previous ones (up to Env.TicketKeys in all) to
// decrypt tickets already issued and dropping the oldest. The Provider
// calls it on its own every Env.TicketRotation.
func (p *Provider) RotateTicketKeys() {
	p.mu.Lock()
	defer p.mu.Unlock()
	keys := make([][32]byte, 1, p.env.TicketKeys)
	keys[0] = newTicketKey()
	keys = append(keys, p.keys[:min(len(p.keys), p.env.TicketKeys-1)]...)
	p.setKeysLocked(keys)
}

// resetTicketKeysLocked replaces every key with one new key: no ticket
// issued before resumes.
func (p *Provider) resetTicketKeysLocked() {
	p.setKeysLocked([][32]byte{newTicketKey()})
}

func (p *Provider) setKeysLocked(keys [][32]byte) {
	p.keys = keys
	// Safe while handshakes run: crypto/tls takes the config's lock.
	p.base.SetSessionTicketKeys(keys)
}

func newTicketKey() [32]byte {
	var k [32]byte
	// crypto/rand.Read never fails on supported platforms (and crashes
	// the program rather than return an error when it cannot read).
	rand.Read(k[:])
	return k
}
