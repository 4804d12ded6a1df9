package admin

import (
	"errors"
	"os"
)

// File returns a duplicate of the admin listener's socket, for handing it
// to another process (a binary upgrade). The caller closes it.
func (s *Server) File() (*os.File, error) {
	f, ok := s.ln.(interface{ File() (*os.File, error) })
	if !ok {
		return nil, errors.New("admin listener: socket does not expose its descriptor")
	}
	return f.File()
}
