//go:build linux

package priority

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// osSupported is "" where the OS rows can run, or why not.
const osSupported = ""

// realCalls are the Linux system calls behind applyPolicy.
var realCalls = osCalls{
	setNice: func(tid, nice int) error { return unix.Setpriority(unix.PRIO_PROCESS, tid, nice) },
	setPolicy: func(tid int, policy, priority uint32) error {
		return unix.SchedSetAttr(tid, &unix.SchedAttr{Policy: policy, Priority: priority}, 0)
	},
}

// gettid returns the calling thread's id.
func gettid() int { return unix.Gettid() }

// pinProcess pins every thread of the process to CPU cpu (threads created
// later inherit it from their creator).
func pinProcess(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("pinning thread %d to CPU %d: %w", tid, cpu, err)
		}
	}
	return nil
}

// threadCPU returns the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// sleep1ms sleeps 1 ms in the calling thread, like usleep(1000).
func sleep1ms() {
	ts := unix.Timespec{Nsec: 1_000_000}
	for {
		var rem unix.Timespec
		if err := unix.Nanosleep(&ts, &rem); err != unix.EINTR {
			return
		}
		ts = rem
	}
}
