package sleep

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// sysWait returns the wait for the methods that are Linux system calls.
func sysWait(method string, d time.Duration) (func(), error) {
	switch method {
	case "nanosleep":
		ts := unix.NsecToTimespec(d.Nanoseconds())
		return func() {
			req := ts
			for unix.Nanosleep(&req, &req) == unix.EINTR {
			}
		}, nil
	case "select":
		return func() {
			tv := unix.NsecToTimeval(d.Nanoseconds())
			for {
				if _, err := unix.Select(0, nil, nil, nil, &tv); err != unix.EINTR {
					return
				}
			}
		}, nil
	case "poll":
		ts := unix.NsecToTimespec(d.Nanoseconds())
		return func() {
			t := ts
			_, _ = unix.Ppoll(nil, &t, nil)
		}, nil
	case "yield":
		return func() { _, _, _ = unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }, nil
	}
	return nil, fmt.Errorf("no system call for method %q", method)
}

// cpuTimes returns the process's user and system CPU time (getrusage, in
// microseconds, unlike /proc's 10 ms ticks).
func cpuTimes() (user, sys time.Duration) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
