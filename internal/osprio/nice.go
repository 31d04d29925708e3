package osprio

// The milder lowering: a nice value, for threads that cannot be raised
// back and may have to run beside another busy process (the cpusched
// package's hand-off threads where it lacks the privilege to raise).

import "time"

// LowerNice sets the nice value of thread tid of this process (0: the
// calling thread) to n (1..19), keeping its policy. Raising a thread's
// nice value needs no privilege; lowering it back does.
//
// Where slice > 0 it also sets the thread's kernel time slice
// (sched_attr.sched_runtime: EEVDF's per-thread slice, Linux 6.12 and
// later; older kernels ignore it), which needs no privilege either. The
// kernel clamps it to 0.1-100 ms. Only a thread at SCHED_OTHER or
// SCHED_BATCH takes a slice; others get the nice value alone.
func LowerNice(tid, n int, slice time.Duration) error { return lowerNice(tid, n, slice) }

// BaseSlice returns the kernel's time slice for a normal thread, as
// sched_getattr reports it for a thread at SCHED_OTHER or SCHED_BATCH
// (sysctl base_slice_ns scaled by the CPU count, unless the thread was
// given one of its own), read from the calling thread, or where that one
// is lowered (a nice value above 0: a hand-off thread, which has a slice
// of its own) from the process's main thread. It returns 0 where neither
// is a normal thread, or the kernel reports none (before Linux 6.12, or
// off Linux).
func BaseSlice() time.Duration { return baseSlice() }

// SetProcessSlice sets the kernel time slice of every thread of this
// process at SCHED_OTHER or SCHED_BATCH whose slice is from now to to (0:
// the kernel's own again), keeping its policy and nice value, and returns
// how many it set. A thread with another slice (one of its own, as a
// hand-off thread's) is left as it is, and so is one that exits
// meanwhile. With a slice it also sets SCHED_FLAG_RESET_ON_FORK, so that
// a process or thread forked from the thread starts at the kernel's own
// slice (without it a child keeps the slice, across exec too), and with
// 0 it clears it. It needs no privilege; off Linux, and where from is 0,
// it does nothing.
func SetProcessSlice(from, to time.Duration) int { return setProcessSlice(from, to) }

// Idle reports whether a is SCHED_IDLE, at any nice value (a thread lowered
// to a nice value and then to SCHED_IDLE keeps the nice value).
func (a Attr) Idle() bool { return a.policy == schedIdle }

// Nice returns a's nice value.
func (a Attr) Nice() int { return int(a.nice) }
