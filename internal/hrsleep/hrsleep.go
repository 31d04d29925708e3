// Package hrsleep sleeps for short durations with sub-millisecond precision.
//
// Go's timers are driven by the netpoller, which waits in whole milliseconds:
// on Linux a time.Sleep(100*time.Microsecond) measured here took about a
// millisecond, as did sleeps of 50us and 250us (docs/performance.md, "Tools"). The
// load generator's open-loop pacer must send each request when it is due
// (latency is measured from then), so on Linux it sleeps the last stretch
// in the nanosleep system call instead, which wakes within the thread's
// timer slack (50us by default; BenchmarkSleep100us compares the two:
// docs/performance.md, "Tools").
package hrsleep

import "time"

// Sleep pauses the calling goroutine for at least d. Durations of
// Coarse or more use time.Sleep; shorter ones use the operating system's
// precise sleep where there is one. While a precise sleep runs, the
// goroutine's thread is in a system call and its P is free for others.
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
