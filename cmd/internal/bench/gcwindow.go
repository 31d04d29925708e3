// The server's GC pauses over a measured window: the difference of the
// runtime's cumulative pause histograms at the window's two ends.

package bench

import (
	"math"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// GCNote is the report config's explanation of every row's gc figures.
const GCNote = "gc: the server's GC pauses over each step's measured window, the difference of " +
	"the cumulative histograms /sched/pauses/total/gc:seconds (pause_*) and " +
	"/sched/pauses/stopping/gc:seconds (stopping_*: the part spent stopping the world) " +
	"read from its /stats at the window's two ends; each figure is its bucket's upper bound, ms"

// GCPauses are the server's stop-the-world GC pauses over a step's
// measured window (see GCNote).
type GCPauses struct {
	// Pauses is how many there were; 0 leaves the figures at 0.
	Pauses uint64 `json:"pauses"`
	// PauseP99Ms and PauseMaxMs are the whole pauses' p99 and longest.
	PauseP99Ms float64 `json:"pause_p99_ms"`
	PauseMaxMs float64 `json:"pause_max_ms"`
	// StoppingP99Ms and StoppingMaxMs are the time to stop the world: the
	// wait for every P to reach a safe point, part of the pause.
	StoppingP99Ms float64 `json:"stopping_p99_ms"`
	StoppingMaxMs float64 `json:"stopping_max_ms"`
}

// gcWindow returns the pauses between two /stats reads of one server.
func gcWindow(before, after serverStats) *GCPauses {
	total := subtractBuckets(after.GC.Total.Buckets, before.GC.Total.Buckets)
	stopping := subtractBuckets(after.GC.Stopping.Buckets, before.GC.Stopping.Buckets)
	g := &GCPauses{}
	g.Pauses, g.PauseP99Ms, g.PauseMaxMs = bucketSummary(total)
	_, g.StoppingP99Ms, g.StoppingMaxMs = bucketSummary(stopping)
	return g
}

// subtractBuckets returns the buckets of later whose count grew since
// earlier, with the growth as their count: the values recorded between
// two reads of one cumulative histogram. Buckets are matched by their
// bounds; a count that shrank (not one histogram) is left out.
func subtractBuckets(later, earlier []demo.Bucket) []demo.Bucket {
	type bounds struct{ lo, hi float64 }
	before := make(map[bounds]uint64, len(earlier))
	for _, b := range earlier {
		before[bounds{b.LoMS, b.HiMS}] = b.Count
	}
	var out []demo.Bucket
	for _, b := range later {
		if was := before[bounds{b.LoMS, b.HiMS}]; b.Count > was {
			b.Count -= was
			out = append(out, b)
		}
	}
	return out
}

// bucketSummary returns the count of buckets (in ascending order), and the
// upper bounds of the bucket that holds the 99th percentile and of the
// highest one, as demo's /stats summarises a whole histogram.
func bucketSummary(buckets []demo.Bucket) (count uint64, p99, maxMs float64) {
	for _, b := range buckets {
		count += b.Count
	}
	if count == 0 {
		return 0, 0, 0
	}
	rank := uint64(math.Ceil(0.99 * float64(count)))
	var cum uint64
	for _, b := range buckets {
		cum += b.Count
		if cum >= rank {
			p99 = b.HiMS
			break
		}
	}
	return count, p99, buckets[len(buckets)-1].HiMS
}
