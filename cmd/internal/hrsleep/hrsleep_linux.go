//go:build linux

package hrsleep

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// timers holds idle timerfds, each wrapped in an *os.File so that reading it
// parks the goroutine in the runtime's network poller. A file dropped from
// the pool is closed by its finalizer.
var timers sync.Pool

// preciseSleep waits for d on a timerfd read through the network poller,
// where the goroutine is parked and its P free. The kernel's timer fires on
// time and the poller wakes the goroutine.
//
// The obvious alternative, the nanosleep system call, is as precise but
// holds its P in a system call for the whole sleep. While any P is in a
// system call the runtime's sysmon thread cannot go to its deep sleep, and
// polls every few tens of microseconds: in the load generator, thousands
// of wake-ups a second, each costing a context switch. On a machine whose
// other threads are SCHED_IDLE (a server under IsolationOSPriority) those
// wake-ups all run at once, and the client used several times the CPU it
// uses beside a server of normal priority
// (docs/measurements/tail-attribution.md#the-load-generators-own-cpu).
func preciseSleep(d time.Duration) {
	f, _ := timers.Get().(*os.File)
	if f == nil {
		fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
		if err != nil {
			nanosleep(d)
			return
		}
		f = os.NewFile(uintptr(fd), "hrsleep-timerfd")
	}
	if !timerfdSleep(f, d) {
		f.Close()
		nanosleep(d)
		return
	}
	timers.Put(f)
}

// timerfdSleep arms f for d and reads its expiry; false if either failed.
func timerfdSleep(f *os.File, d time.Duration) bool {
	rc, err := f.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		serr = unix.TimerfdSettime(int(fd), 0, &spec, nil)
	})
	if err != nil || serr != nil {
		return false
	}
	var buf [8]byte
	_, err = f.Read(buf[:])
	return err == nil
}

// nanosleep is the fallback where a timerfd cannot be had.
func nanosleep(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	for {
		var rem unix.Timespec
		err := unix.Nanosleep(&ts, &rem)
		if err != unix.EINTR {
			return
		}
		ts = rem
	}
}
