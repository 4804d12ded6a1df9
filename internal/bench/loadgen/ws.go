package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"time"
)

// WSConfig describes a WebSocket echo run: each connection sends a binary
// message, waits for it to come back, and sends the next (closed loop), for
// Duration.
type WSConfig struct {
	// URL is the ws:// URL of an echo endpoint. Required.
	URL string
	// Connections is the number of WebSocket connections. Zero means 100.
	Connections int
	// Duration is how long messages are sent; it must be positive.
	Duration time.Duration
	// MessageBytes is each message's size. Zero means 128.
	MessageBytes int
	// Timeout bounds the handshake and each echo. Zero means 5s.
	Timeout time.Duration
}

// WSResult is what a WebSocket run measured.
type WSResult struct {
	Format       string  `json:"format"`
	URL          string  `json:"url"`
	Connections  int     `json:"connections"`
	DurationS    float64 `json:"duration_s"`
	MessageBytes int     `json:"message_bytes"`
	// Messages counts messages echoed back whole; MessagesPerS is that
	// over the run's time.
	Messages     uint64  `json:"messages"`
	MessagesPerS float64 `json:"messages_per_s"`
	// Errors: Connect (dial or upgrade refused), Read, Write, Timeout;
	// Non2xx counts upgrades answered with another status than 101.
	Errors  Errors    `json:"errors"`
	Latency LatencyMS `json:"latency_ms"`
}

// FormatWS is the Format of WSResult.
const FormatWS = "helios-wsload/1"

// wsGUID is RFC 6455's key suffix.
const wsGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// errUpgrade reports an upgrade the server did not accept.
var errUpgrade = errors.New("websocket upgrade refused")

// RunWS runs WebSocket echo load as cfg says. It fails only on an invalid
// configuration.
func RunWS(ctx context.Context, cfg WSConfig) (*WSResult, error) {
	u, err := parseURL(cfg.URL, "ws")
	if err != nil {
		return nil, err
	}
	if cfg.Duration <= 0 {
		return nil, errors.New("duration must be positive")
	}
	cfg.Connections = cmpOr(cfg.Connections, 100)
	cfg.MessageBytes = cmpOr(cfg.MessageBytes, 128)
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	all, errs, elapsed := closedLoop(cfg.Connections, cfg.Duration, func(w *worker, end time.Time) {
		msg := make([]byte, cfg.MessageBytes)
		for j := range msg {
			msg[j] = 'a' + byte(j%26)
		}
		for time.Now().Before(end) && ctx.Err() == nil {
			kind, err := wsSession(ctx, u, msg, end, cfg.Timeout, &w.hist)
			if err == nil {
				return
			}
			w.errs[kind]++
			if kind == errConnect || kind == errStatus {
				// Do not hammer a refusing server: one try per 100ms.
				sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
			}
		}
	})
	res := &WSResult{Format: FormatWS, URL: cfg.URL, Connections: cfg.Connections, DurationS: cfg.Duration.Seconds(),
		MessageBytes: cfg.MessageBytes, Errors: errs}
	res.Messages = all.Count()
	res.MessagesPerS = float64(res.Messages) / elapsed.Seconds()
	res.Latency = summarize(&all)
	return res, nil
}

// worker is one closed-loop client's tally.
type worker struct {
	hist Histogram
	errs [numErrorKinds]uint64
}

// closedLoop runs n clients, each calling work until the end of d, and
// returns their merged latencies and errors and the time they took (at
// least d).
func closedLoop(n int, d time.Duration, work func(w *worker, end time.Time)) (Histogram, Errors, time.Duration) {
	start := time.Now()
	end := start.Add(d)
	ws := make([]worker, n)
	var wg sync.WaitGroup
	for i := range ws {
		w := &ws[i]
		wg.Go(func() { work(w, end) })
	}
	wg.Wait()
	elapsed := max(time.Since(start), d)
	var all Histogram
	var errs Errors
	for i := range ws {
		all.Merge(&ws[i].hist)
		errs.add(ws[i].errs)
	}
	return all, errs, elapsed
}

// parseURL parses raw and requires the scheme and an explicit host:port.
func parseURL(raw, scheme string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != scheme || u.Port() == "" {
		return nil, fmt.Errorf("url %q: want %s://host:port/path", raw, scheme)
	}
	return u, nil
}

// cmpOr returns v, or def when v is not positive.
func cmpOr(v, def int) int {
	if v > 0 {
		return v
	}
	return def
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

// add counts errs into e.
func (e *Errors) add(errs [numErrorKinds]uint64) {
	e.Connect += errs[errConnect]
	e.Read += errs[errRead]
	e.Write += errs[errWrite]
	e.Timeout += errs[errTimeout]
	e.Non2xx += errs[errStatus]
}

// summarize returns the latency summary of h.
func summarize(h *Histogram) LatencyMS {
	return LatencyMS{
		Mean:  ms(h.Mean()),
		P50:   ms(h.Quantile(0.50)),
		P90:   ms(h.Quantile(0.90)),
		P99:   ms(h.Quantile(0.99)),
		P999:  ms(h.Quantile(0.999)),
		Max:   ms(h.Max()),
		Count: h.Count(),
	}
}

// wsSession opens one WebSocket connection and echoes msg over it until
// end, recording each round trip. It returns nil at the end, or the kind
// of the failure that ended the connection.
func wsSession(ctx context.Context, u *url.URL, msg []byte, end time.Time, timeout time.Duration, hist *Histogram) (errorKind, error) {
	nc, err := net.DialTimeout("tcp", u.Host, timeout)
	if err != nil {
		return classify(err, errConnect), err
	}
	defer nc.Close()
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Now()) })
	defer stop()
	br := bufio.NewReaderSize(nc, 32<<10)
	nc.SetDeadline(time.Now().Add(timeout))
	if err := wsHandshake(nc, br, u); err != nil {
		if errors.Is(err, errUpgrade) {
			return errStatus, err
		}
		return classify(err, errConnect), err
	}
	frame := maskedFrame(msg)
	got := make([]byte, len(msg))
	for time.Now().Before(end) {
		if ctx.Err() != nil {
			return 0, nil
		}
		sent := time.Now()
		nc.SetDeadline(sent.Add(timeout))
		if _, err := nc.Write(frame); err != nil {
			return classify(err, errWrite), err
		}
		if err := readFrame(br, got); err != nil {
			return classify(err, errRead), err
		}
		hist.Record(time.Since(sent))
	}
	return 0, nil
}

// wsHandshake sends the upgrade request and checks the 101 answer.
func wsHandshake(nc net.Conn, br *bufio.Reader, u *url.URL) error {
	var k [16]byte
	rand.Read(k[:])
	key := base64.StdEncoding.EncodeToString(k[:])
	path := u.RequestURI()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\nOrigin: http://" + u.Host + "\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		return err
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(line, []byte("HTTP/1.1 101")) {
		return fmt.Errorf("%w: %q", errUpgrade, bytes.TrimSpace(line))
	}
	sum := sha1.Sum([]byte(key + wsGUID))
	want := base64.StdEncoding.EncodeToString(sum[:])
	accepted := false
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		name, value, _ := bytes.Cut(line, []byte(":"))
		if bytes.EqualFold(name, []byte("Sec-WebSocket-Accept")) && string(bytes.TrimSpace(value)) == want {
			accepted = true
		}
	}
	if !accepted {
		return fmt.Errorf("%w: no valid Sec-WebSocket-Accept", errUpgrade)
	}
	return nil
}

// maskedFrame returns msg as one masked binary frame (a client's frames
// must be masked, RFC 6455 section 5.3).
func maskedFrame(msg []byte) []byte {
	var b bytes.Buffer
	b.WriteByte(0x82) // FIN, binary
	switch n := len(msg); {
	case n < 126:
		b.WriteByte(0x80 | byte(n))
	case n <= 0xffff:
		b.WriteByte(0x80 | 126)
		binary.Write(&b, binary.BigEndian, uint16(n))
	default:
		b.WriteByte(0x80 | 127)
		binary.Write(&b, binary.BigEndian, uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	b.Write(mask[:])
	for i, c := range msg {
		b.WriteByte(c ^ mask[i%4])
	}
	return b.Bytes()
}

// errFrame reports a frame that is not the echo of the message sent.
var errFrame = errors.New("unexpected websocket frame")

// readFrame reads one unmasked binary or text frame of len(dst) bytes into
// dst; control frames (ping, pong) before it are skipped.
func readFrame(br *bufio.Reader, dst []byte) error {
	for {
		var h [2]byte
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return err
		}
		n := uint64(h[1] & 0x7f)
		switch n {
		case 126:
			var l [2]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return err
			}
			n = uint64(binary.BigEndian.Uint16(l[:]))
		case 127:
			var l [8]byte
			if _, err := io.ReadFull(br, l[:]); err != nil {
				return err
			}
			n = binary.BigEndian.Uint64(l[:])
		}
		if h[1]&0x80 != 0 {
			return fmt.Errorf("%w: masked by the server", errFrame)
		}
		switch op := h[0] & 0x0f; {
		case op >= 8 && op != 8: // ping, pong
			if _, err := br.Discard(int(n)); err != nil {
				return err
			}
			continue
		case op == 8:
			return fmt.Errorf("%w: close", errFrame)
		case h[0]&0x80 == 0 || n != uint64(len(dst)):
			return fmt.Errorf("%w: %d bytes, fin %v", errFrame, n, h[0]&0x80 != 0)
		}
		_, err := io.ReadFull(br, dst)
		return err
	}
}
