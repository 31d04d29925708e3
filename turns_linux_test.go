package cpusched

// Turns (turns.go): a task on a lowered hand-off thread yields the thread
// to the kernel at a Checkpoint every handoffTurn, and only there.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cpusched/cpusched/internal/osprio"
)

// computeFor returns a task that computes until its thread has used d of
// CPU time, calling Checkpoint after each step of about step of wall
// time if step is not 0, and records its thread's nice value at its end.
// CPU time, not wall time: on a busy machine a lowered thread may get
// little of the CPU, and it can only take turns while it runs.
func computeFor(d, step time.Duration, nice *atomic.Int64) func(*Task) error {
	return func(tk *Task) error {
		end := osprio.ThreadCPU() + int64(d)
		for next := time.Now(); osprio.ThreadCPU() < end; {
			if step > 0 && !time.Now().Before(next) {
				if err := tk.Checkpoint(); err != nil {
					return err
				}
				next = time.Now().Add(step)
			}
		}
		attr, err := unix.SchedGetAttr(0, 0)
		nice.Store(int64(attr.Nice))
		return err
	}
}

// TestTurns: a task with Checkpoints on a lowered hand-off thread
// (unraisableNice where threads cannot be raised, SCHED_IDLE where they
// can) takes a turn (yields) about every handoffTurn, never more often,
// whether its Checkpoints come every microsecond or every 50; and a task
// without Checkpoints takes none.
func TestTurns(t *testing.T) {
	const run = 40 * handoffTurn
	for _, raisable := range []bool{false, true} {
		for _, tc := range []struct {
			name      string
			step      time.Duration
			wantTurns bool
		}{
			{"dense", time.Microsecond, true},
			{"sparse", 50 * time.Microsecond, true},
			{"no-checkpoints", 0, false},
		} {
			name := tc.name
			if raisable {
				name = "raisable-" + name
			}
			t.Run(name, func(t *testing.T) {
				var turns atomic.Int64
				opts := []Option{WithWorkers(1), withoutSlicePins(), withTurn(func() { turns.Add(1) })}
				var s *Scheduler
				if raisable {
					s = raisableHandoffScheduler(t, opts...)
				} else {
					s = unraisableScheduler(t, newFakeMachine(false), opts...)
				}
				var nice atomic.Int64
				start := time.Now()
				if err := s.Run(context.Background(), computeFor(run, tc.step, &nice)); err != nil {
					t.Fatal(err)
				}
				took := time.Since(start)
				if !raisable && nice.Load() != unraisableNice {
					t.Fatalf("the task ran at nice %d; want %d", nice.Load(), unraisableNice)
				}
				n := turns.Load()
				t.Logf("%d turns in %v", n, took)
				// At most one turn per handoffTurn of the task's run, by
				// construction; at least one per 4 of them, by its pacing
				// (a Checkpoint at least every 127 or every step).
				if most := int64(took/handoffTurn) + 1; n > most {
					t.Errorf("%d turns in %v; want at most %d", n, took, most)
				}
				// The lower bound holds where the thread ran most of the
				// time: turns are paced by the rate of its Checkpoints,
				// which a thread the kernel leaves waiting (SCHED_IDLE on
				// a machine busy with other tests: 5 turns in 18.7 ms in
				// one CI run) makes look slow.
				busy := took > run*3/2
				if least := int64(run / handoffTurn / 4); tc.wantTurns && n < least && !busy {
					t.Errorf("%d turns in %v; want at least %d", n, took, least)
				}
				if !tc.wantTurns && n != 0 {
					t.Errorf("%d turns; want none", n)
				}
			})
		}
	}
}

// raisableHandoffScheduler returns an IsolationOSPriority Scheduler that
// hands every task off to a SCHED_IDLE hand-off thread, without a guard;
// it skips the test where a lowered thread cannot be raised back here.
func raisableHandoffScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	needOSPriority(t)
	if err := probeOSRestore(); err != nil {
		t.Skipf("a lowered thread cannot be raised back here (%v)", err)
	}
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withOSHandoff(), withoutGuard()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// TestTurnsStopWhenLeft: a task that leaves its lowered thread once the
// scheduler turns contended (retire.go) takes its turns while contended,
// as every task then does, and none once the scheduler is quiet again:
// it runs at normal priority to its end.
func TestTurnsStopWhenLeft(t *testing.T) {
	retryLoose(t, func() uint64 {
		var turns atomic.Int64
		m := newFakeMachine(false)
		s := unraisableScheduler(t, m, WithWorkers(1), withTurn(func() { turns.Add(1) }))
		w := startWatched(t, s, false)
		defer w.end()
		if !within(5*time.Second, func() bool { return w.nice.Load() == unraisableNice && turns.Load() > 0 }) {
			t.Fatalf("the task never took a turn on its lowered thread (nice %d, %d turns)", w.nice.Load(), turns.Load())
		}
		lowered := int(w.tid.Load())
		m.busy.Store(true)
		if !within(5*time.Second, func() bool { return int(w.tid.Load()) != lowered }) {
			t.Fatalf("the task stayed on thread %d (nice %d)", lowered, w.nice.Load())
		}
		if landedLowered(w) {
			return 1
		}
		if after := turns.Load(); !within(5*time.Second, func() bool { return turns.Load() > after }) {
			t.Errorf("no turn while contended after the task left its thread")
		}
		if n := turnsOnceQuiet(t, m, s, &turns); n != 0 {
			t.Errorf("%d turns at normal priority, quiet, after the task left its thread; want none", n)
		}
		if err := w.end(); err != nil {
			t.Fatal(err)
		}
		return s.Stats().LooseThreads
	})
}

// TestTurnsWhileContended: where threads cannot be raised, a task
// dispatched on its own goroutine while contended (lockContended) runs at
// normal priority and takes its turns (yields in a system call, so that
// its P is free while the kernel runs others) while contended, and none
// once the scheduler is quiet again.
func TestTurnsWhileContended(t *testing.T) {
	var turns atomic.Int64
	m := newFakeMachine(false)
	s := unraisableScheduler(t, m, WithWorkers(1), withTurn(func() { turns.Add(1) }))
	m.busy.Store(true)
	untilContended(t, s)
	w := startWatched(t, s, false)
	defer w.end()
	if !within(5*time.Second, func() bool { return w.tid.Load() != 0 }) {
		t.Fatal("the task never ran")
	}
	if w.nice.Load() != 0 || w.policy.Load() != unix.SCHED_NORMAL {
		t.Fatalf("the task ran at policy %d nice %d; want normal priority", w.policy.Load(), w.nice.Load())
	}
	if after := turns.Load(); !within(5*time.Second, func() bool { return turns.Load() >= after+10 }) {
		t.Errorf("%d turns while contended; want 10 at least", turns.Load()-after)
	}
	if n := turnsOnceQuiet(t, m, s, &turns); n != 0 {
		t.Errorf("%d turns quiet; want none", n)
	}
	if err := w.end(); err != nil {
		t.Fatal(err)
	}
}

// TestOwnTurnsWhileContended: where threads can be raised, a task on its
// own goroutine takes its turns while contended once it counts as lowered:
// dispatched while contended (its thread never lowered), or lowered while
// quiet and raised when the guard turned contended; none once quiet.
func TestOwnTurnsWhileContended(t *testing.T) {
	for _, tc := range []struct {
		name       string
		busyBefore bool
	}{{"dispatched-contended", true}, {"raised", false}} {
		t.Run(tc.name, func(t *testing.T) {
			var turns atomic.Int64
			m := newFakeMachine(tc.busyBefore)
			s := guardedScheduler(t, m, WithWorkers(1), withTurn(func() { turns.Add(1) }))
			if tc.busyBefore {
				untilContended(t, s)
				turns.Store(0)
			}
			stop := make(chan struct{})
			done := make(chan error, 1)
			var tid atomic.Int64
			go func() {
				done <- s.Run(context.Background(), func(tk *Task) error {
					tid.Store(int64(unix.Gettid()))
					for {
						select {
						case <-stop:
							return nil
						default:
						}
						spin(2 * time.Microsecond)
						if err := tk.Checkpoint(); err != nil {
							return err
						}
					}
				})
			}()
			defer func() {
				close(stop)
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			if !tc.busyBefore {
				if !within(5*time.Second, func() bool { return tid.Load() != 0 && policyOf(t, int(tid.Load())) == unix.SCHED_IDLE }) {
					t.Fatal("the task was never lowered, quiet")
				}
				time.Sleep(20 * handoffTurn)
				if n := turns.Load(); n != 0 {
					t.Fatalf("%d turns on its own goroutine, quiet; want none", n)
				}
				m.busy.Store(true)
			}
			if !within(10*time.Second, func() bool { return turns.Load() >= 10 }) {
				t.Errorf("%d turns while contended (Contended %v); want 10 at least", turns.Load(), s.Stats().Contended)
			}
			if n := turnsOnceQuiet(t, m, s, &turns); n != 0 {
				t.Errorf("%d turns quiet; want none", n)
			}
		})
	}
}

// untilContended runs a task on s that makes Checkpoints until s's guard,
// which reads a busy fake machine, says it is contended.
func untilContended(t *testing.T, s *Scheduler) {
	t.Helper()
	err := s.Run(context.Background(), func(tk *Task) error {
		for deadline := time.Now().Add(10 * time.Second); !s.Stats().Contended; {
			if time.Now().After(deadline) {
				return errors.New("the scheduler never turned contended")
			}
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// turnsOnceQuiet turns m quiet, waits for s's guard to say so, and
// returns the turns counted over the next 20 turns' length.
func turnsOnceQuiet(t *testing.T, m *fakeMachine, s *Scheduler, turns *atomic.Int64) int64 {
	t.Helper()
	m.busy.Store(false)
	if !within(10*time.Second, func() bool { return !s.Stats().Contended }) {
		t.Fatal("the guard never turned quiet")
	}
	after := turns.Load()
	time.Sleep(20 * handoffTurn)
	return turns.Load() - after
}

// BenchmarkCheckpointTurns is Checkpoint in a task on a hand-off thread at
// unraisableNice, where every Checkpoint counts down to the task's next
// turn: against BenchmarkCheckpoint (a task whose Checkpoints test one
// word) and BenchmarkCheckpointBaseline. Its ns/op include the turns'
// yields, one every handoffTurn.
func BenchmarkCheckpointTurns(b *testing.B) {
	if err := probeOSPriority(); err != nil {
		b.Skipf("this machine refuses lowering a thread's priority (%v)", err)
	}
	benchCheckpoints(b, benchScheduler(b, WithIsolation(IsolationOSPriority), WithWorkers(1), withoutGuard(),
		withOS(nil, func() error { return errCannotRaise }, nil)))
}

// TestNoTurnsWhileLent: while a slot is lent to the rest of the program
// (lend.go), a task on a lowered hand-off thread takes no turns; once the
// slot comes back, it takes them again.
func TestNoTurnsWhileLent(t *testing.T) {
	needOSPriority(t)
	if err := probeOSRestore(); err != nil {
		t.Skipf("a lowered thread cannot be raised back here (%v)", err)
	}
	var turns atomic.Int64
	load := &fakeLoad{}
	load.busy.Store(true)
	s, err := New(WithIsolation(IsolationOSPriority), WithWorkers(2), withOSHandoff(), withoutGuard(),
		withLendSample(200*time.Microsecond, load.sample), withTurn(func() { turns.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var stop atomic.Bool
	defer stop.Store(true) // before Close, on a failure
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), func(task *Task) error {
			for !stop.Load() {
				spin(5 * time.Microsecond)
				if err := task.Checkpoint(); err != nil {
					return err
				}
			}
			return nil
		})
	}()
	if !within(10*time.Second, func() bool { return s.Stats().Lent == 1 }) {
		t.Fatalf("no slot lent after 10 s (Lent %d)", s.Stats().Lent)
	}
	before := turns.Load()
	time.Sleep(40 * handoffTurn)
	if n := turns.Load() - before; n != 0 && s.Stats().Lent == 1 {
		t.Errorf("%d turns while a slot was lent; want none", n)
	}
	load.busy.Store(false)
	if !within(10*time.Second, func() bool { return s.Stats().Lent == 0 }) {
		t.Fatalf("the slot never came back (Lent %d)", s.Stats().Lent)
	}
	before = turns.Load()
	if !within(10*time.Second, func() bool { return turns.Load() > before }) {
		t.Error("no turn in 10 s once the slot came back")
	}
	stop.Store(true)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWakeYieldReleasesWhileContended: while contended, a task's thread
// that yields on waking (yieldWoken) does it in a system call the runtime
// knows of, as a turn does: beside a busy process a bare yield waits out
// that process's kernel slice with the P held, and a stop of the world
// waits for it. Quiet, the yield stays the bare one.
func TestWakeYieldReleasesWhileContended(t *testing.T) {
	var bare, releasing atomic.Int64
	onYield := func(r bool) {
		if r {
			releasing.Add(1)
		} else {
			bare.Add(1)
		}
	}
	needOSPriority(t)
	m := newFakeMachine(false)
	s, err := New(WithIsolation(IsolationOSPriority), withGuardSource(m.source()), withOSHandoff(),
		WithWorkers(1), WithSlice(minSlice), withYieldWoken(onYield))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())

	// Two hand-off tasks take turns on the one slot, each wake of a parked
	// one a yield on waking, until 4 yields have been counted.
	takeTurns := func(tk *Task) error {
		for deadline := time.Now().Add(10 * time.Second); bare.Load()+releasing.Load() < 4 && time.Now().Before(deadline); {
			spin(20 * time.Microsecond)
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	runConcurrently(t, s, 2, takeTurns)
	if n := releasing.Load(); n != 0 {
		t.Errorf("quiet: %d yields on waking released the P; want none", n)
	}
	if bare.Load() == 0 {
		t.Fatal("quiet: no yield on waking")
	}

	m.busy.Store(true)
	untilContended(t, s)
	bare.Store(0)
	releasing.Store(0)
	runConcurrently(t, s, 2, takeTurns)
	if !s.Stats().Contended {
		t.Skip("the scheduler turned quiet meanwhile")
	}
	if n := bare.Load(); n != 0 {
		t.Errorf("contended: %d yields on waking held the P (a bare sched_yield); want none", n)
	}
	if releasing.Load() == 0 {
		t.Error("contended: no yield on waking")
	}
}
