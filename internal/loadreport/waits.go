package loadreport

// The histogram of the calls' waits for CPU, whose 99th percentile is a
// named metric of the reports.

import (
	"math"
	"sync/atomic"
	"time"
)

const (
	// perOctave buckets per doubling: the p99 is rounded up to a bound, so
	// it reads at most 19% high (2^(1/4)), finer than cpusched.Histogram's
	// doubling buckets, which would read up to twice the wait.
	perOctave = 4
	// numBuckets spans 1us to 2^27 us (about 134 s) and a last bucket
	// without a bound: waits longer than any call's deadline.
	numBuckets = 27*perOctave + 2
)

// waitHistogram counts waits in numBuckets buckets: bucket i counts the
// waits d with bound(i-1) < d <= bound(i), bucket 0 those up to 1us.
type waitHistogram struct {
	counts [numBuckets]atomic.Uint64
}

// bound returns the upper bound of bucket i < numBuckets-1.
func bound(i int) time.Duration {
	return time.Duration(float64(time.Microsecond) * math.Exp2(float64(i)/perOctave))
}

// bucketOf returns the bucket that counts d.
func bucketOf(d time.Duration) int {
	if d <= time.Microsecond {
		return 0
	}
	i := min(numBuckets-1, int(math.Ceil(perOctave*math.Log2(float64(d)/float64(time.Microsecond)))))
	for i > 0 && d <= bound(i-1) { // Log2's rounding at a bound
		i--
	}
	for i < numBuckets-1 && d > bound(i) {
		i++
	}
	return i
}

func (h *waitHistogram) record(d time.Duration) { h.counts[bucketOf(d)].Add(1) }

// snapshot returns the counts now.
func (h *waitHistogram) snapshot() [numBuckets]uint64 {
	var c [numBuckets]uint64
	for i := range c {
		c[i] = h.counts[i].Load()
	}
	return c
}

// p99 returns the 99th percentile of the waits counted between the
// snapshots from and to, as the bound of its bucket (the last bounded
// bucket's bound for the unbounded one), or 0 if none were counted.
func p99(from, to *[numBuckets]uint64) time.Duration {
	var n uint64
	for i := range to {
		n += to[i] - from[i]
	}
	if n == 0 {
		return 0
	}
	rank := (99*n + 99) / 100 // ceil(0.99 n)
	var seen uint64
	for i := range to {
		if seen += to[i] - from[i]; seen >= rank {
			return bound(min(i, numBuckets-2))
		}
	}
	return bound(numBuckets - 2)
}
