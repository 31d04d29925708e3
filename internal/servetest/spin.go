package servetest

import (
	"runtime"
	"time"
)

// Spin computes for about d of wall time, without a Checkpoint: a heavy
// route's handler, for the tests of the Auto wrappers. Alone on its
// thread, that is about d of the thread's CPU time.
func Spin(d time.Duration) {
	start := time.Now()
	x := uint64(1)
	for time.Since(start) < d {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	runtime.KeepAlive(x)
}
