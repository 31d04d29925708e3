package cpusched

// Turns: a task on a lowered hand-off thread (SCHED_IDLE, or nice 10
// where a lowered thread cannot be raised back: retire.go) gives its CPU
// back to the kernel (sched_yield) at a Checkpoint every handoffTurn of
// wall time; while the scheduler is contended, so does a task at normal
// priority (below).
//
// Why. The kernel's EEVDF gives a lowered thread its share in turns,
// however small the share (weight 110 at nice 10, 3 for SCHED_IDLE,
// against a normal thread's 1024): once picked, the thread runs until it
// has used its slice and then until the next tick (4 ms at HZ 250). A
// server thread woken meanwhile takes the CPU (a SCHED_IDLE thread is
// preempted at once, a nice-10 one for its longer slice:
// unraisableSlice), but one that was already runnable, and lost the CPU
// to the lowered thread at a tick, waits that turn out. sched_yield ends
// the turn: it moves the thread's deadline on by its slice, so the kernel
// picks any thread that is owed the CPU, and goes on with this one if
// none is. What turns bought the probe, and cost the CPU-heavy work, is
// in docs/measurements/unprivileged.md#turns.
//
// The price: beside a fast path that keeps the CPUs busy (the bench's
// io-heavy), the CPU-heavy work yields to it more often and makes fewer
// passes. A task that never calls Checkpoint (a bcrypt or gzip call)
// takes no turns: it runs out the kernel's turns as before. A yield is
// one system call per turn when nothing else waits, and each Checkpoint
// of such a task counts down (BenchmarkCheckpointTurns). No task on a
// lowered thread yields while a slot is lent (lend.go): the rest of the
// program then has a P of its own and keeps it busy, the kernel's weights
// already give its threads most of the CPU, and turns only took passes
// from the task left running, for no lower tail (the record above).
//
// While contended (contention.go) every task that calls Checkpoint takes
// turns, at normal priority too: hand-off tasks, tasks that left their
// threads (retire.go), tasks dispatched on their own goroutines where
// threads cannot be raised (lockContended), and, with the privilege,
// tasks on their own goroutines once they count as lowered, their threads
// raised or never lowered while contended (preemptTurns: raiseLocked,
// lowerIfLongLocked); before that, their first osLowerAfter, their
// countdown paces the lowering check (lowering.go). Such a turn yields in
// a system call the runtime knows of (osprio.YieldReleasing).
// Why: beside a busy neighbour the kernel runs the neighbour's threads
// in turns with the task's, and a task thread that lost the CPU in the
// middle of its work holds its P until it runs again, so a stop of the
// world waited for it, 2-3 ms each in a trace of the bench's neighbor
// step. A thread that yields in a system call waits for the CPU inside
// it, its P in a system call, which a stop of the world takes at once.
// The price is some of the tasks' CPU, which goes to the neighbour
// (docs/measurements/busy-machine.md#turns-while-contended).
//
// How. Checkpoint's countdown (Task.lowerCheck, which only
// IsolationOSPriority uses and, on a hand-off thread, only for turns)
// brings the task to turn every so many Checkpoints, paced by the rate of
// its Checkpoints so far, as lowerSelf paces its checks, so that a task
// whose Checkpoints come every few nanoseconds reads the clock rarely; at
// a turn's end it yields if its thread is lowered. The osTask fields
// that pace lowering on a task's own goroutine pace its turns: a hand-off
// task never uses them for lowering, and a task on its own goroutine no
// longer does once it counts as lowered (osTask's comment).

import (
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// handoffTurn is how long a task on a lowered hand-off thread computes
// between yields to the kernel: the lengths tried read alike alone, and
// the shortest lowest beside a neighbour that takes the CPUs
// (docs/measurements/unprivileged.md#turns).
const handoffTurn = 250 * time.Microsecond

// beginTurns starts t's turns, at now: t, about to begin on a hand-off
// thread, is paced from here. On t's goroutine.
func (t *Task) beginTurns(now int64) {
	t.os.computed = turnClock(now)
	t.os.lowerSeen = 0
	t.countDown(lowerCheckEvery)
}

// turnClock is now in microseconds, modulo 2^32: osTask.computed holds a
// turn's start so, and the difference of two readings less than 71
// minutes apart is right.
func turnClock(now int64) int32 { return int32(uint32(now / int64(time.Microsecond))) }

// turn is Checkpoint's countdown step on a hand-off task, or on a task
// on its own goroutine that takes turns while contended
// (osMode.countdown): once handoffTurn has passed since the turn began, t
// yields its thread to the kernel, while contended always (in a system
// call the runtime knows of), else if it is a hand-off task whose thread
// is lowered and no slot is lent, and a new turn begins; the next check
// is set by the rate of t's Checkpoints. A task on its own goroutine, or
// one that left its thread (retire.go), stops its countdown once the
// scheduler is quiet. On t's goroutine.
func (s *Scheduler) turn(t *Task) {
	now := s.clock.Now()
	elapsed := int64(uint32(turnClock(now)-t.os.computed)) * int64(time.Microsecond)
	seen := int64(t.os.lowerSeen)
	left := int64(handoffTurn) - elapsed
	if left <= 0 {
		yield := osprio.YieldReleasing // contended: every task takes its turns (above)
		if !s.os.keepNormal.Load() {
			if !t.os.handoff {
				t.setLowerCheck(0) // on its own goroutine: turns only while contended
				return
			}
			s.mu.Lock()
			lowered, gone, lent := !t.os.raised, t.os.left(), s.os.lentLocked() > 0
			s.mu.Unlock()
			if gone {
				t.setLowerCheck(0)
				return
			}
			yield = nil
			if lowered && !lent { // not with a slot lent (above)
				yield = osprio.Yield
			}
		}
		if yield != nil {
			s.cfg.hooks.turnTaken()
			yield()
		}
		t.os.computed = turnClock(now)
		t.os.lowerSeen = 0
		left = int64(handoffTurn)
	}
	n := int64(lowerCheckEvery)
	if elapsed > 0 && seen > 0 {
		n = left * seen / elapsed
	}
	t.countDown(n)
}

// yieldWoken is what a lowered thread does first when it runs again after
// sleeping (a hand-off thread given a task, a parked task given its slot
// back): it offers its CPU once to the normal threads waiting there.
//
// Linux's EEVDF scheduler (measured on 6.18) does not keep SCHED_IDLE strict
// at a wake-up. A normal thread woken on a CPU where a lowered one runs
// preempts it at once; but where both are queued when the CPU picks its next
// thread (a hand-off wakes the next task's thread onto the CPU its yielder
// leaves, and a server thread wakes there too), the kernel may pick the
// lowered one, which then keeps the CPU until the scheduler's next tick (4
// ms at HZ=250) while the normal thread waits. perf sched found that only
// where tasks handed their slots on at Checkpoints, more with shorter
// slices, and not where they ran through; yielding once on waking removed
// most of it (docs/measurements/ospriority-settings.md#yield-on-wake). With
// nothing else runnable on the CPU the system call returns at once.
//
// While contended the yield is made in a system call the runtime knows of,
// as a turn's is (above): beside a busy process the yield gives the CPU
// to that process's thread for its kernel slice, and a thread that waited
// it out in a bare system call held its P meanwhile, so a stop of the
// world waited for it (docs/measurements/busy-machine.md#the-yield-on-waking-while-contended).
func (s *Scheduler) yieldWoken() {
	releasing := s.os.keepNormal.Load()
	s.cfg.hooks.yieldWoken(releasing)
	if releasing {
		osprio.YieldReleasing()
		return
	}
	osprio.Yield()
}
