// Package hrsleep sleeps for short durations with sub-millisecond precision.
//
// Go's timers are driven by the netpoller, which waits in whole milliseconds:
// on Linux a time.Sleep of a fraction of a millisecond takes about a whole
// one (docs/performance.md#tools). The load generator's open-loop pacer
// must send each request when it is due (latency is measured from then),
// so on Linux it sleeps the last stretch on a timerfd read through the
// network poller instead, which wakes within the timer slack (50us by
// default; BenchmarkSleep100us compares the two: docs/performance.md#tools).
// The goroutine is parked meanwhile, not blocked in a system call
// (hrsleep_linux.go says why that matters).
package hrsleep

import "time"

// Sleep pauses the calling goroutine for at least d. Durations of
// Coarse or more use time.Sleep; shorter ones use the operating system's
// precise sleep where there is one. While a precise sleep runs, the
// goroutine is parked and its thread and P are free for others.
func Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	if d >= Coarse {
		time.Sleep(d)
		return
	}
	preciseSleep(d)
}

// Coarse is the shortest duration for which Sleep uses the runtime's timers.
const Coarse = 2 * time.Millisecond
