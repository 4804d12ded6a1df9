package backend

import (
	"fmt"
	"math/rand/v2"
)

// The bounds of /json/N.
const (
	minJSON = 16
	maxJSON = 16 << 20
)

// jsonDoc is a /json/N document.
type jsonDoc struct {
	n    int
	body []byte
}

// jsonOf returns the n-byte document, made once per size asked for in a
// row: a benchmark's requests all ask for one.
func (b *Backend) jsonOf(n int) []byte {
	if d := b.json.Load(); d != nil && d.n == n {
		return d.body
	}
	d := &jsonDoc{n: n, body: JSON(n)}
	b.json.Store(d)
	return d.body
}

// JSON returns n bytes (at least 16) of JSON such as an API answers
// with: an object holding a list of records whose keys repeat and whose
// values vary, the same for every call with the same n. Space after the
// document makes up the length exactly.
func JSON(n int) []byte {
	rng := rand.New(rand.NewPCG(uint64(n), 20))
	words := []string{"alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima"}
	b := make([]byte, 0, n+256)
	b = append(b, `{"items":[`...)
	var rec []byte
	for i := 0; ; i++ {
		rec = rec[:0]
		if i > 0 {
			rec = append(rec, ',')
		}
		rec = fmt.Appendf(rec, `{"id":%d,"name":"%s %s","price":%d.%02d,"stock":%d,"active":%t,"updated":"2025-%02d-%02dT%02d:%02d:%02dZ","tags":["%s","%s"]}`,
			100000+rng.IntN(900000), words[rng.IntN(len(words))], words[rng.IntN(len(words))], rng.IntN(1000), rng.IntN(100),
			rng.IntN(500), rng.IntN(2) == 0, 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60),
			words[rng.IntN(len(words))], words[rng.IntN(len(words))])
		if len(b)+len(rec)+2 > n {
			break
		}
		b = append(b, rec...)
	}
	b = append(b, "]}"...)
	for len(b) < n {
		b = append(b, '\n')
	}
	return b
}
