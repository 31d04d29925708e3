//go:build linux

package osprio

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

const supported = true

func threadCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}

// threadCPUOf reads thread tid's CPU clock: the clock id the kernel
// derives from a thread id (MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED), as
// glibc's pthread_getcpuclockid makes it).
func threadCPUOf(tid int) int64 {
	var ts unix.Timespec
	if unix.ClockGettime(int32(^tid<<3|6), &ts) != nil {
		return 0
	}
	return ts.Nano()
}

func threadID() int { return unix.Gettid() }

// yield is a raw system call: the runtime need not hand the P on for it,
// as it does not for a preemption by the kernel.
func yield() { unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

func yieldReleasing() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// lower makes thread tid (0: the calling thread) SCHED_IDLE.
func lower(tid int) error {
	attr := unix.SchedAttr{Policy: schedIdle, Nice: idleNice}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("osprio: sched_setattr(idle): %w", err)
	}
	return nil
}

// schedDeadline is SCHED_DEADLINE, whose runtime, deadline and period
// Attr does not keep.
const schedDeadline = 6

// current reads thread tid's setting (0: the calling thread's).
func current(tid int) (Attr, error) {
	attr, err := getAttr(tid)
	if err != nil {
		return Attr{}, err
	}
	switch attr.Policy {
	case 0, 1, 2, 3, 5, 7: // OTHER, FIFO, RR, BATCH, IDLE, EXT
	case schedDeadline:
		return Attr{}, errors.New("osprio: the thread is SCHED_DEADLINE")
	default:
		return Attr{}, fmt.Errorf("osprio: the thread has an unknown scheduling policy %d", attr.Policy)
	}
	return Attr{
		policy:   uint8(attr.Policy),
		nice:     int8(attr.Nice),
		priority: uint8(attr.Priority),
		flags:    uint8(attr.Flags & unix.SCHED_FLAG_RESET_ON_FORK),
	}, nil
}

// restore applies a to the calling thread.
func restore(a Attr) error { return restoreThread(0, a) }

// restoreThread applies a to thread tid (0: the calling thread).
func restoreThread(tid int, a Attr) error {
	attr := unix.SchedAttr{Policy: uint32(a.policy), Flags: uint64(a.flags), Nice: int32(a.nice), Priority: uint32(a.priority)}
	if err := unix.SchedSetAttr(tid, &attr, 0); err != nil {
		return fmt.Errorf("osprio: sched_setattr(%s): %w", a, err)
	}
	return nil
}

func processCPU() int64 {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return ts.Nano()
}
