package engine

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// statusLines holds pre-rendered "HTTP/1.1 NNN Reason\r\n" lines.
type statusLines [600][]byte

func newStatusLines() *statusLines {
	var s statusLines
	for code := 100; code < 600; code++ {
		text := http.StatusText(code)
		if text == "" {
			text = "status code " + strconv.Itoa(code)
		}
		s[code] = []byte("HTTP/1.1 " + strconv.Itoa(code) + " " + text + "\r\n")
	}
	return &s
}

// line returns the status line for code (codes outside 100..599 are
// rendered as 500; callers validate statuses before).
func (s *statusLines) line(code int) []byte {
	if code < 100 || code >= 600 {
		code = 500
	}
	return s[code]
}

// dateCache renders the Date header once a second instead of per response.
type dateCache struct {
	cur atomic.Pointer[dateEntry]
}

type dateEntry struct {
	sec   int64
	line  []byte // "Date: ...\r\n"
	value string // the field's value alone (HTTP/2 answers)
}

func (d *dateCache) line(now time.Time) []byte {
	sec := now.Unix()
	if e := d.cur.Load(); e != nil && e.sec == sec {
		return e.line
	}
	v := now.UTC().Format(http.TimeFormat)
	e := &dateEntry{sec: sec, line: []byte("Date: " + v + "\r\n"), value: v}
	d.cur.Store(e)
	return e.line
}

// value returns the Date field's value for now.
func (d *dateCache) value(now time.Time) string {
	if e := d.cur.Load(); e != nil && e.sec == now.Unix() {
		return e.value
	}
	d.line(now)
	return d.cur.Load().value
}
