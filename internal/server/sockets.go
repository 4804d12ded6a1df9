package server

import (
	"errors"
	"fmt"
	"net"
	"os"

	"go.uber.org/zap"

	"github.com/helios-lb/helios/internal/config"
	"github.com/helios-lb/helios/internal/listener"
)

// Sockets hands the server listening sockets that exist already: those
// of the process a binary upgrade replaces, or those systemd passes
// (socket activation). A listener that gets none binds its address, after
// checking that no other process holds it.
type Sockets interface {
	// Listener returns the sockets for the listener with this name and
	// configured address, and forgets them; nil when there are none.
	Listener(name, address string) []*os.File
	// Admin returns the socket for the admin listener at this configured
	// address, and forgets it; nil when there is none.
	Admin(address string) *os.File
}

// HandoffSocket is one of a running server's listening sockets, as a
// binary upgrade passes it on.
type HandoffSocket struct {
	// Admin is true for the admin listener's socket.
	Admin bool
	// Address is the configured address of the listener it belongs to.
	Address string
	// File is a duplicate of the socket; the caller closes it.
	File *os.File
}

// openPool returns the socket pool for a listener: the sockets handed
// over for it, or sockets bound now.
func (s *Server) openPool(lc config.Listener, c listener.Config) (*listener.Pool, error) {
	if s.sockets != nil {
		if files := s.sockets.Listener(lc.Name, lc.Address); len(files) > 0 {
			p, err := listener.Adopt(c, files)
			if err == nil {
				s.log.Info("listener takes over sockets handed to this process", zap.String("listener", lc.Name),
					zap.String("address", p.Addr().String()), zap.Int("sockets", len(files)))
			}
			return p, err
		}
	}
	if err := listener.CheckFree(c); err != nil {
		return nil, err
	}
	return listener.Listen(c)
}

// adminListener returns the admin socket handed over, or nil to have the
// admin server bind its address.
func (s *Server) adminListener(address string) (net.Listener, error) {
	if s.sockets == nil {
		return nil, nil
	}
	f := s.sockets.Admin(address)
	if f == nil {
		return nil, nil
	}
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("admin listener: adopting socket %s: %w", f.Name(), err)
	}
	return ln, nil
}

// HandoffSockets returns duplicates of every listening socket, the admin
// listener's included, for a binary upgrade. The caller closes them.
func (s *Server) HandoffSockets() ([]HandoffSocket, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []HandoffSocket
	fail := func(err error) ([]HandoffSocket, error) {
		for _, h := range out {
			h.File.Close()
		}
		return nil, err
	}
	for _, bl := range s.listeners {
		files, err := bl.pool.Files()
		if err != nil {
			return fail(err)
		}
		for _, f := range files {
			out = append(out, HandoffSocket{Address: bl.cfg.Address, File: f})
		}
	}
	if s.admin != nil {
		f, err := s.admin.File()
		if err != nil {
			return fail(err)
		}
		out = append(out, HandoffSocket{Admin: true, Address: s.gen.cfg.Admin.Address, File: f})
	}
	if len(out) == 0 {
		return nil, errors.New("no listening sockets to hand over")
	}
	return out, nil
}
