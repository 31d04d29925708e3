package schedtest

import (
	"runtime"
	"sync"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// Spin computes for about d of CPU time without a Checkpoint, however
// long a busy machine makes that take: a number of rounds of work
// measured once against the thread's CPU clock (off Linux, against the
// wall clock). For the handlers of heavy routes in the tests of the Auto
// wrappers, whose measure is the thread's CPU time.
func Spin(d time.Duration) {
	work(int(float64(d) * roundsPerNs()))
}

// work computes n rounds.
func work(n int) {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	runtime.KeepAlive(x)
}

// roundsPerNs is the rounds of work per ns of its thread's CPU time.
var roundsPerNs = sync.OnceValue(func() float64 {
	const n = 5_000_000
	if !osprio.Supported() {
		start := time.Now()
		work(n)
		return n / float64(max(time.Since(start), 1))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start := osprio.ThreadCPU()
	work(n)
	return n / float64(max(osprio.ThreadCPU()-start, 1))
})
