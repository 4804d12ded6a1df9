package hpack

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestTableAgainstModel adds entries of random sizes to a table whose
// maximum size changes now and then, and checks it after every step
// against a plain slice that follows RFC 7541 §4.3-4.4 (evict oldest
// first; an entry larger than the table empties it): same entries,
// same order, same size; the byte ring never exceeds the maximum size
// it has had.
func TestTableAgainstModel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for run := range 20 {
		var tb table
		tb.max = DefaultTableSize
		var model []tf // newest first
		var modelSize uint64
		largest := tb.max
		evict := func() {
			for modelSize > tb.max {
				last := model[len(model)-1]
				modelSize -= uint64(len(last.name)+len(last.value)) + entryOverhead
				model = model[:len(model)-1]
			}
		}
		for step := range 2000 {
			switch {
			case r.IntN(50) == 0:
				tb.setMax(uint64(r.IntN(5000)))
				largest = max(largest, tb.max)
				evict()
			default:
				name := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(20))
				value := fmt.Sprint(step) + strings.Repeat("v", r.IntN(r.IntN(2000)+1))
				tb.add([]byte(name), []byte(value))
				size := uint64(len(name)+len(value)) + entryOverhead
				if size > tb.max {
					model, modelSize = nil, 0
				} else {
					model = append([]tf{{name, value, false}}, model...)
					modelSize += size
					evict()
				}
			}
			if got := dynTable(&tb); !slices.Equal(got, model) || tb.size != modelSize {
				t.Fatalf("run %d step %d: table %d entries (size %d), want %d (size %d)", run, step, len(got), tb.size, len(model), modelSize)
			}
			if uint64(len(tb.buf)) > largest {
				t.Fatalf("run %d step %d: ring of %d bytes for a table of at most %d", run, step, len(tb.buf), largest)
			}
		}
	}
}

// TestTableEmptyEntries: entries with an empty name and value take no
// ring bytes but 32 of the table's size.
func TestTableEmptyEntries(t *testing.T) {
	var tb table
	tb.max = 100
	for range 5 {
		tb.add(nil, nil)
	}
	if tb.len() != 3 || tb.size != 96 || tb.used != 0 {
		t.Fatalf("got %d entries, size %d, %d bytes; want 3, 96, 0", tb.len(), tb.size, tb.used)
	}
	tb.add([]byte("a"), []byte("b"))
	want := []tf{{"a", "b", false}, {"", "", false}, {"", "", false}}
	if got := dynTable(&tb); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
