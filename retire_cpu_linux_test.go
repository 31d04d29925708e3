package cpusched

// The CPU time of a task that left its hand-off thread (retire.go:
// lockLanded): its goroutine is locked to the thread it lands on, and its
// stretches are still measured by a thread's clock.

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUNow is the calling thread's CPU clock.
func threadCPUNow(t *testing.T) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Error(err)
	}
	return time.Duration(ts.Nano())
}

// leftReading is what a task that left its hand-off thread saw of itself
// across a stretch of its work after it landed: the Stats snapshots
// taken from fn at both ends, its thread's CPU clock at both ends, and
// the threads and nice values it ran on.
type leftReading struct {
	before, after         Stats
	clockFrom, clockTo    time.Duration
	landed, lowered       int
	moved, niced, stalled bool
}

// TestLeftTaskCPUMeasured: unraisable and contended, a task leaves its
// lowered hand-off thread at a Checkpoint (or a Blocking call); from then
// on its goroutine stays on one thread at normal priority, its CPUTime
// follows that thread's clock and none of it falls back to slot time, and
// the thread is not lowered again once the machine goes quiet.
func TestLeftTaskCPUMeasured(t *testing.T) {
	for _, via := range []string{"checkpoint", "blocking"} {
		t.Run(via, func(t *testing.T) {
			retryLoose(t, func() uint64 {
				m := newFakeMachine(false)
				s := unraisableScheduler(t, m, WithWorkers(1))
				r := runLeft(t, s, m, via == "blocking")
				if r.stalled {
					return 0 // reported
				}
				if loose := r.after.LooseThreads; loose != 0 {
					return loose
				}
				checkLeftReading(t, r)
				return 0
			})
		})
	}
}

// runLeft runs one task on s that computes, with Checkpoints or Blocking
// calls, until it has left its lowered hand-off thread (turning m busy
// once it runs lowered), then reads itself over 100 ms of work, and over
// more while m goes quiet again.
func runLeft(t *testing.T, s *Scheduler, m *fakeMachine, blocking bool) (r leftReading) {
	t.Helper()
	step := func(tk *Task) error {
		for end := time.Now().Add(200 * time.Microsecond); time.Now().Before(end); {
		}
		if blocking {
			tk.Blocking(func() { time.Sleep(50 * time.Microsecond) })
			return nil
		}
		return tk.Checkpoint()
	}
	nice := func() int {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			t.Error(err)
			return -100
		}
		return int(attr.Nice)
	}
	err := s.Run(context.Background(), func(tk *Task) error {
		deadline := time.Now().Add(10 * time.Second)
		for nice() != unraisableNice {
			if time.Now().After(deadline) {
				r.stalled = true
				t.Error("the task's thread never ran lowered")
				return nil
			}
			if err := step(tk); err != nil {
				return err
			}
		}
		r.lowered = unix.Gettid()
		m.busy.Store(true)
		for unix.Gettid() == r.lowered {
			if time.Now().After(deadline) {
				r.stalled = true
				t.Errorf("the task never left its lowered thread %d (contended %v)", r.lowered, s.Stats().Contended)
				return nil
			}
			if err := step(tk); err != nil {
				return err
			}
		}
		r.landed = unix.Gettid()
		r.before, r.clockFrom = s.Stats(), threadCPUNow(t)
		for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
			if err := step(tk); err != nil {
				return err
			}
			r.moved = r.moved || unix.Gettid() != r.landed
		}
		r.clockTo, r.after = threadCPUNow(t), s.Stats()
		// Quiet again: the guard lowers the raised threads it can, and
		// must leave this one alone.
		m.busy.Store(false)
		for time.Now().Before(deadline) && s.Stats().Contended {
			if err := step(tk); err != nil {
				return err
			}
		}
		for range 200 {
			if err := step(tk); err != nil {
				return err
			}
			r.niced = r.niced || nice() != 0
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkLeftReading checks r (TestLeftTaskCPUMeasured).
func checkLeftReading(t *testing.T, r leftReading) {
	t.Helper()
	cpu := r.after.CPUTime - r.before.CPUTime
	fallback := r.after.CPUTimeFallback - r.before.CPUTimeFallback
	run := r.after.RunTime - r.before.RunTime
	clock := r.clockTo - r.clockFrom
	t.Logf("left thread %d for %d: CPUTime %v (fallback %v), RunTime %v, thread clock %v", r.lowered, r.landed, cpu, fallback, run, clock)
	if r.moved {
		t.Errorf("the task's goroutine moved off thread %d it landed on", r.landed)
	}
	if r.niced {
		t.Errorf("the thread %d the task landed on ran lowered after the guard went quiet", r.landed)
	}
	if fallback > cpu/20 {
		t.Errorf("fallback %v of CPUTime %v, want under 5%%", fallback, cpu)
	}
	// Wide margins: the CPU used inside Blocking's fn is the thread's but
	// not the task's (about a fifth of the work, sleeping), and the
	// snapshots read the clock a little apart from fn's readings.
	if cpu > clock+2*time.Millisecond || cpu < clock/2 {
		t.Errorf("CPUTime %v over the stretch, thread clock %v: want about the clock, at most it", cpu, clock)
	}
}

// TestContendedTaskCPUMeasured: unraisable and contended, new tasks run
// on their own goroutines (dispatch); each is locked to its thread while
// fn runs, waits for its slot there (two tasks share one slot, so their
// Checkpoints park), runs at normal priority, and its CPUTime follows the
// thread's clock with none of it falling back to slot time.
func TestContendedTaskCPUMeasured(t *testing.T) {
	m := newFakeMachine(false)
	s := unraisableScheduler(t, m, WithWorkers(1))
	// Turn the scheduler contended: a task computes until the guard says so.
	err := s.Run(context.Background(), func(tk *Task) error {
		m.busy.Store(true)
		for deadline := time.Now().Add(10 * time.Second); !s.Stats().Contended; {
			if time.Now().After(deadline) {
				t.Fatal("the scheduler never turned contended")
			}
			for end := time.Now().Add(200 * time.Microsecond); time.Now().Before(end); {
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
	type reading struct {
		clock        time.Duration
		moved, niced bool
	}
	var got [2]reading
	before := s.Stats()
	hs := make([]*Handle, len(got))
	for i := range got {
		r := &got[i]
		h, err := s.Go(context.Background(), func(tk *Task) error {
			tid, from := unix.Gettid(), threadCPUNow(t)
			for end := time.Now().Add(60 * time.Millisecond); time.Now().Before(end); {
				for spin := time.Now().Add(200 * time.Microsecond); time.Now().Before(spin); {
				}
				if err := tk.Checkpoint(); err != nil {
					return err
				}
				r.moved = r.moved || unix.Gettid() != tid
				if attr, err := unix.SchedGetAttr(0, 0); err != nil || attr.Nice != 0 || attr.Policy != unix.SCHED_NORMAL {
					r.niced = true
				}
			}
			r.clock = threadCPUNow(t) - from
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h
	}
	for _, h := range hs {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	if !after.Contended {
		t.Skip("the guard went quiet meanwhile; the tasks may have been handed off")
	}
	cpu := after.CPUTime - before.CPUTime
	fallback := after.CPUTimeFallback - before.CPUTimeFallback
	clock := got[0].clock + got[1].clock
	t.Logf("two tasks contended: CPUTime %v (fallback %v), RunTime %v, thread clocks %v", cpu, fallback, after.RunTime-before.RunTime, clock)
	for i, r := range got {
		if r.moved {
			t.Errorf("task %d's goroutine moved between threads while fn ran", i)
		}
		if r.niced {
			t.Errorf("task %d's thread ran lowered", i)
		}
	}
	if fallback > cpu/20 {
		t.Errorf("fallback %v of CPUTime %v, want under 5%%", fallback, cpu)
	}
	if cpu > clock+2*time.Millisecond || cpu < clock/2 {
		t.Errorf("CPUTime %v, the threads' clocks %v: want about the clocks, at most them", cpu, clock)
	}
}
