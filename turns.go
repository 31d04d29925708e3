package cpusched

// Turns: where a lowered thread cannot be raised back (retire.go), a task
// on a hand-off thread at unraisableNice gives its CPU back to the kernel
// (sched_yield) at a Checkpoint every unraisableTurn of wall time.
//
// Why. The kernel's EEVDF gives a nice-10 thread (weight 110 against
// 1024) its share in turns: once picked, the thread runs until it has
// used its slice (unraisableSlice) and then until the next tick (4 ms at
// HZ 250), and a server thread that waits for the CPU meanwhile, runnable
// but not waking, waits that turn out. A SCHED_IDLE thread, which is what
// the privilege allows, is almost never picked while a normal thread
// waits. sched_yield ends the turn: it moves the thread's deadline on by
// its slice, so the kernel picks any thread that is owed the CPU, and
// goes on with this one if none is. With turns, the bench's hog-sched
// step run unprivileged read about the floor's probe p99, where it read
// up to twice it (docs/measurements/unprivileged.md#turns).
//
// The price: beside a fast path that keeps the CPUs busy (the bench's
// io-heavy), the CPU-heavy work yields to it more often and makes fewer
// passes. A task that never calls Checkpoint (a bcrypt or gzip call)
// takes no turns: it runs out the kernel's turns as before. A yield is
// one system call per turn when nothing else waits, and each Checkpoint
// of such a task counts down (BenchmarkCheckpointTurns).
//
// How. Checkpoint's countdown (Task.lowerCheck, which only
// IsolationOSPriority uses and, on a hand-off thread, only for turns)
// brings the task to turn every so many Checkpoints, paced by the rate of
// its Checkpoints so far, as lowerSelf paces its checks, so that a task
// whose Checkpoints come every few nanoseconds reads the clock rarely; at
// a turn's end it yields if its thread is still lowered. The osTask fields
// that pace lowering on a task's own goroutine, which a hand-off task
// never uses, pace its turns (osTask's comment).

import (
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// unraisableTurn is how long a task on a hand-off thread at
// unraisableNice computes between yields to the kernel: 0.25, 0.5 and 1
// ms read alike on hog-sched, and 0.25 ms lowest beside a neighbour that
// takes the CPUs (docs/measurements/unprivileged.md#turns).
const unraisableTurn = 250 * time.Microsecond

// beginTurns starts t's turns, at now: t, about to begin on a hand-off
// thread where threads cannot be raised, is paced from here. On t's
// goroutine.
func (t *Task) beginTurns(now int64) {
	t.os.computed = turnClock(now)
	t.os.lowerSeen = 0
	t.countDown(lowerCheckEvery)
}

// turnClock is now in microseconds, modulo 2^32: osTask.computed holds a
// turn's start so, and the difference of two readings less than 71
// minutes apart is right.
func turnClock(now int64) int32 { return int32(uint32(now / int64(time.Microsecond))) }

// turn is Checkpoint's countdown step on a hand-off task (osMode.countdown):
// once unraisableTurn has passed since the turn began, t yields its
// thread to the kernel if the thread is still lowered, and a new turn
// begins; the next check is set by the rate of t's Checkpoints. A task
// that left its thread (retire.go) runs at normal priority to its end:
// its countdown stops. On t's goroutine.
func (s *Scheduler) turn(t *Task) {
	now := s.clock.Now()
	elapsed := int64(uint32(turnClock(now)-t.os.computed)) * int64(time.Microsecond)
	seen := int64(t.os.lowerSeen)
	left := int64(unraisableTurn) - elapsed
	if left <= 0 {
		s.mu.Lock()
		lowered, gone := !t.os.raised, t.os.left()
		s.mu.Unlock()
		if gone {
			t.setLowerCheck(0)
			return
		}
		if lowered { // a thread raised while contended does not yield to the neighbour
			s.cfg.hooks.turnTaken()
			osprio.Yield()
		}
		t.os.computed = turnClock(now)
		t.os.lowerSeen = 0
		left = int64(unraisableTurn)
	}
	n := int64(lowerCheckEvery)
	if elapsed > 0 && seen > 0 {
		n = left * seen / elapsed
	}
	t.countDown(n)
}
