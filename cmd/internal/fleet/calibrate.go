package fleet

// The rates scaled to the machine: DefaultQuotaRate and DefaultBatchRate
// were chosen where a heavy call's work took ReferenceHeavy. On a faster
// machine the same rates leave the weak replica under its quota and the
// batch scenario short of its knee, so that neither shows what the
// reports do (docs/grpc.md#what-it-runs). A rate left at 0 is the default
// scaled by ReferenceHeavy over this machine's heavy call, measured
// before any replica starts: the same CPU of heavy work per second.

import (
	"hash/crc32"
	"runtime"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
)

// ReferenceHeavy is the heavy call's work (HeavyPasses CRC32 passes of
// demo.BufferSize) on the machine where the default rates were chosen:
// 3.9 to 4.2 ms of CPU per call, 7.8 to 8.3 us a pass in a loop of its
// own.
const ReferenceHeavy = 4 * time.Millisecond

// heavyRuns is how many times MeasureHeavy runs the heavy call's work.
const heavyRuns = 20

// MeasureHeavy returns how long the heavy call's work takes here: the
// least of heavyRuns runs of its CRC32 passes on the calling goroutine,
// without gRPC or a scheduler. The least, because other work on the
// machine only ever lengthens a run.
func MeasureHeavy() time.Duration {
	buf := make([]byte, demo.BufferSize)
	least := time.Duration(1<<63 - 1)
	var sum uint32
	for range heavyRuns {
		start := time.Now()
		for range HeavyPasses {
			sum = crc32.Update(sum, crc32.IEEETable, buf)
		}
		least = min(least, time.Since(start))
	}
	runtime.KeepAlive(sum)
	return least
}

// scaledRate is rate, chosen where the heavy call took ReferenceHeavy,
// for a machine where it takes heavy, within MinRate..MaxRate.
func scaledRate(rate float64, heavy time.Duration) float64 {
	if heavy <= 0 {
		return rate
	}
	return min(max(rate*float64(ReferenceHeavy)/float64(heavy), MinRate), MaxRate)
}

// withRates returns c with each rate left at 0 set to its default scaled
// by heavy, which measure returns (called only if a rate is 0), and that
// measurement.
func (c Config) withRates(measure func() time.Duration) (Config, time.Duration) {
	if c.QuotaRate != 0 && c.BatchRate != 0 && c.NeighborRate != 0 {
		return c, 0
	}
	heavy := measure()
	if c.QuotaRate == 0 {
		c.QuotaRate = scaledRate(DefaultQuotaRate, heavy)
	}
	if c.BatchRate == 0 {
		c.BatchRate = scaledRate(DefaultBatchRate, heavy)
	}
	if c.NeighborRate == 0 {
		c.NeighborRate = scaledRate(DefaultNeighborRate, heavy)
	}
	return c, heavy
}
