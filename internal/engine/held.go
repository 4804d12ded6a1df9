package engine

// BodyHeld returns the request body when the loop holds all of it in
// memory, unsent (wire.Exchange): what request buffering kept in memory,
// or a small body that came with the head (maxLoopBody). A body that
// streams, or that buffering put in part in a temporary file, is not
// held: reading a file on a loop would block it.
func (c *lconn) BodyHeld() ([]byte, bool) {
	switch {
	case c.bodyBuf == bufferedWhole:
		if f, n := c.bb.File(); f != nil && n > 0 {
			return nil, false
		}
		return c.bb.Mem(), true
	case c.bodyBuf == bufferedPrefix || c.bodySent || c.reqBody.read > 0:
		return nil, false
	case !c.req.HasBody():
		return nil, true
	}
	return c.reqBody.fullyBuffered()
}
