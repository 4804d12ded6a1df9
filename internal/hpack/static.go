package hpack

import "unsafe"

// staticTable is the static table of RFC 7541 Appendix A; entry i is
// staticTable[i-1].
var staticTable = [...]struct{ name, value string }{
	{":authority", ""},
	{":method", "GET"},
	{":method", "POST"},
	{":path", "/"},
	{":path", "/index.html"},
	{":scheme", "http"},
	{":scheme", "https"},
	{":status", "200"},
	{":status", "204"},
	{":status", "206"},
	{":status", "304"},
	{":status", "400"},
	{":status", "404"},
	{":status", "500"},
	{"accept-charset", ""},
	{"accept-encoding", "gzip, deflate"},
	{"accept-language", ""},
	{"accept-ranges", ""},
	{"accept", ""},
	{"access-control-allow-origin", ""},
	{"age", ""},
	{"allow", ""},
	{"authorization", ""},
	{"cache-control", ""},
	{"content-disposition", ""},
	{"content-encoding", ""},
	{"content-language", ""},
	{"content-length", ""},
	{"content-location", ""},
	{"content-range", ""},
	{"content-type", ""},
	{"cookie", ""},
	{"date", ""},
	{"etag", ""},
	{"expect", ""},
	{"expires", ""},
	{"from", ""},
	{"host", ""},
	{"if-match", ""},
	{"if-modified-since", ""},
	{"if-none-match", ""},
	{"if-range", ""},
	{"if-unmodified-since", ""},
	{"last-modified", ""},
	{"link", ""},
	{"location", ""},
	{"max-forwards", ""},
	{"proxy-authenticate", ""},
	{"proxy-authorization", ""},
	{"range", ""},
	{"referer", ""},
	{"refresh", ""},
	{"retry-after", ""},
	{"server", ""},
	{"set-cookie", ""},
	{"strict-transport-security", ""},
	{"transfer-encoding", ""},
	{"user-agent", ""},
	{"vary", ""},
	{"via", ""},
	{"www-authenticate", ""},
}

// staticLen is the number of static table entries: dynamic table entry
// i has index staticLen+i.
const staticLen = len(staticTable)

// staticByName maps a static name to its lowest index.
var staticByName = func() map[string]uint8 {
	m := make(map[string]uint8, staticLen)
	for i := staticLen - 1; i >= 0; i-- {
		m[staticTable[i].name] = uint8(i + 1)
	}
	return m
}()

// staticField returns the name and value of static entry i (1 to
// staticLen) as views of the table's strings: they are read-only (a
// write faults) and never change, and their capacity is their length.
func staticField(i int) (name, value []byte) {
	e := &staticTable[i-1]
	return view(e.name), view(e.value)
}

// view returns s as a read-only byte slice (nil when s is empty).
func view(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// staticSearch returns the lowest static index whose name is name (0
// if none) and whether the entry at the returned index also has value
// as its value.
func staticSearch(name, value []byte) (i int, exact bool) {
	first := int(staticByName[string(name)])
	if first == 0 {
		return 0, false
	}
	for j := first; j <= staticLen && staticTable[j-1].name == staticTable[first-1].name; j++ {
		if staticTable[j-1].value == string(value) {
			return j, true
		}
	}
	return first, false
}
