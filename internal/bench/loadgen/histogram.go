package loadgen

import (
	"math"
	"math/bits"
	"time"
)

// subBits is the number of significant bits a bucket keeps: values are
// recorded to within 1/64 (1.6%) of their size, like an HDR histogram with
// two significant decimal digits, in a fixed array and without allocation.
const subBits = 7

// numBuckets covers every int64 nanosecond value.
const numBuckets = (64 - subBits + 1) << (subBits - 1)

// Histogram records durations in log-linear buckets. The zero Histogram is
// empty and ready to use. It is not safe for concurrent use: give each
// goroutine its own and Merge them.
type Histogram struct {
	counts [numBuckets]uint64
	n      uint64
	sum    float64 // nanoseconds
	max    int64   // nanoseconds
}

// bucketOf returns the bucket of v nanoseconds (v >= 0). Values below 128
// have a bucket each; above, each power of two is split into 64 buckets.
func bucketOf(v int64) int {
	shift := max(bits.Len64(uint64(v))-subBits, 0)
	return shift<<(subBits-1) + int(uint64(v)>>shift)
}

// bucketRange returns the lowest and highest value of bucket i.
func bucketRange(i int) (lo, hi int64) {
	half := 1 << (subBits - 1)
	if i < 2*half {
		return int64(i), int64(i)
	}
	shift := i/half - 1
	mant := int64(i - shift*half)
	return mant << shift, (mant+1)<<shift - 1
}

// Record adds one duration; negative durations count as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(v)]++
	h.n++
	h.sum += float64(v)
	h.max = max(h.max, v)
}

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	h.max = max(h.max, o.max)
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value, exactly; 0 when empty.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max) }

// Mean returns the mean of the recorded values, exactly; 0 when empty.
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(math.Round(h.sum / float64(h.n)))
}

// Quantile returns the value below which a fraction q (0-1) of the recorded
// values lie, to the bucket's precision: the midpoint of the bucket that
// holds the ceil(q*n)-th smallest value, never above Max. It returns 0 when
// the histogram is empty.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			lo, hi := bucketRange(i)
			return time.Duration(min(lo+(hi-lo)/2, h.max))
		}
	}
	return time.Duration(h.max)
}
