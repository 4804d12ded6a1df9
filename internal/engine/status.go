package engine

import (
	"net/http"
	"sync/atomic"
	"time"
)

// dateCache renders the Date header once a second instead of per response.
type dateCache struct {
	cur atomic.Pointer[dateEntry]
}

type dateEntry struct {
	sec   int64
	line  []byte // "Date: ...\r\n"
	value []byte // the field's value alone (HTTP/2 answers); read, never written
}

func (d *dateCache) line(now time.Time) []byte {
	sec := now.Unix()
	if e := d.cur.Load(); e != nil && e.sec == sec {
		return e.line
	}
	v := now.UTC().Format(http.TimeFormat)
	e := &dateEntry{sec: sec, line: []byte("Date: " + v + "\r\n"), value: []byte(v)}
	d.cur.Store(e)
	return e.line
}

// value returns the Date field's value for now.
func (d *dateCache) value(now time.Time) []byte {
	if e := d.cur.Load(); e != nil && e.sec == now.Unix() {
		return e.value
	}
	d.line(now)
	return d.cur.Load().value
}
