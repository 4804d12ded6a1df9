package h2

// OpenStream opens a stream on a client connection and writes its
// request head; endStream: there is no body. It fails with
// ErrCannotOpen (nothing was sent; the request may go elsewhere) when
// CanOpen is false, and with ErrWrongRole on a server connection.
// h.Authority, when empty, is taken from a "host" field; "host" fields
// are not sent (RFC 9113 §8.3.1).
func (c *Conn) OpenStream(h *RequestHead, endStream bool) (*Stream, error) {
	if !c.client {
		return nil, ErrWrongRole
	}
	if !c.CanOpen() {
		return nil, ErrCannotOpen
	}
	c.enter()
	id := c.nextStream
	c.nextStream += 2
	s := c.newStream(id)
	s.isHead = string(h.Method) == "HEAD"
	s.answered = true
	authority := h.Authority
	if len(authority) == 0 {
		for _, f := range h.Fields {
			if equalFold(f.Name, "host") {
				authority = f.Value
				break
			}
		}
	}
	c.encBuf = c.encBuf[:0]
	c.encodePseudo(nameMethod, h.Method)
	if string(h.Method) != "CONNECT" || len(h.Protocol) > 0 {
		c.encodePseudo(nameScheme, h.Scheme)
		c.encodePseudo(namePath, h.Path)
	}
	c.encodePseudo(nameAuthority, authority)
	if len(h.Protocol) > 0 {
		c.encodePseudo(nameProtocol, h.Protocol)
	}
	for _, f := range h.Fields {
		c.encodeField(f)
	}
	c.writeHeaderBlock(id, endStream)
	if endStream {
		s.sendEnded = true
	}
	c.exit()
	return s, nil
}

// CanOpen reports whether OpenStream would open a stream now: the
// connection lives, has not been told GOAWAY or shut down, and has
// fewer open streams than the server's SETTINGS_MAX_CONCURRENT_STREAMS.
// A pool opens another connection when it is false.
func (c *Conn) CanOpen() bool { return c.AvailableStreams() > 0 }

// AvailableStreams returns how many more streams a client connection
// may open now (0 on a server connection).
func (c *Conn) AvailableStreams() int {
	if !c.client || c.err != nil || c.goAwayRecv || c.shutdownPhase > 0 || c.nextStream > maxWindow {
		return 0
	}
	n := int64(c.peerMaxStreams) - int64(len(c.streams))
	// Stream ids run out at 2^31-1.
	n = min(n, int64(maxWindow-c.nextStream)/2+1)
	return int(max(n, 0))
}

// PeerMaxStreams returns the peer's SETTINGS_MAX_CONCURRENT_STREAMS,
// and whether its SETTINGS have arrived (before, a client assumes 100).
func (c *Conn) PeerMaxStreams() (n uint32, known bool) { return c.peerMaxStreams, c.sawSettings }

// PeerConnectProtocol reports whether the server allows extended
// CONNECT (RFC 8441): OpenStream may then carry a Protocol.
func (c *Conn) PeerConnectProtocol() bool { return c.peerConnect }
