package cpusched

// Retiring lowered threads that cannot be raised back (retire.go): the
// scheduler is told a lowered thread cannot be raised (withOS), so it
// hands every task off and never raises; the guard reads a fake machine
// (contention_linux_test.go) that the test turns busy.

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cpusched/cpusched/internal/osprio"
)

var errCannotRaise = errors.New("test: a lowered thread cannot be raised back here")

// unraisableScheduler returns an IsolationOSPriority Scheduler that
// believes a lowered thread cannot be raised back, whose guard reads m.
func unraisableScheduler(t *testing.T, m *fakeMachine, opts ...Option) *Scheduler {
	t.Helper()
	needOSPriority(t)
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withGuardSource(m.source()),
		withOS(nil, func() error { return errCannotRaise }, nil)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if st := s.Stats(); st.ThreadsRaisable || st.Isolation != IsolationOSPriority {
		t.Fatalf("Stats: ThreadsRaisable %v, Isolation %v; want false, ospriority", st.ThreadsRaisable, st.Isolation)
	}
	return s
}

// threadAlive reports whether thread tid of this process still exists.
func threadAlive(tid int) bool {
	_, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid))
	return err == nil
}

// watchedTask is a task that computes with Checkpoints until stop is
// closed, and publishes, after each Checkpoint, its thread and that
// thread's policy.
type watchedTask struct {
	tid, policy, nice atomic.Int64
	stop              chan struct{}
	done              chan error
	end               func() error // stops the task and returns Run's error
	err               error
}

func startWatched(t *testing.T, s *Scheduler, blocking bool) *watchedTask {
	w := &watchedTask{stop: make(chan struct{}), done: make(chan error, 1)}
	var once sync.Once
	w.end = func() error {
		once.Do(func() { close(w.stop); w.err = <-w.done })
		return w.err
	}
	t.Cleanup(func() { w.end() }) // before the Scheduler's Close, registered earlier
	go func() {
		w.done <- s.Run(context.Background(), func(tk *Task) error {
			for {
				w.tid.Store(int64(unix.Gettid()))
				attr, _ := unix.SchedGetAttr(0, 0)
				w.policy.Store(int64(attr.Policy))
				w.nice.Store(int64(attr.Nice))
				select {
				case <-w.stop:
					return nil
				default:
				}
				if blocking {
					tk.Blocking(func() { time.Sleep(50 * time.Microsecond) })
				} else if err := tk.Checkpoint(); err != nil {
					return err
				}
			}
		})
	}()
	return w
}

// TestUnraisableThreadIsLeftWhenContended: a task handed off to a lowered
// thread that cannot be raised leaves it at its next Checkpoint (or
// Blocking call) once the guard turns contended, goes on at normal
// priority on another thread, and the lowered thread ends.
func TestUnraisableThreadIsLeftWhenContended(t *testing.T) {
	for _, tc := range []struct {
		name     string
		blocking bool
	}{{"checkpoint", false}, {"blocking", true}} {
		t.Run(tc.name, func(t *testing.T) {
			retryLoose(t, func() uint64 {
				m := newFakeMachine(false)
				s := unraisableScheduler(t, m, WithWorkers(1))
				w := startWatched(t, s, tc.blocking)
				defer w.end()
				if !within(5*time.Second, func() bool { return w.nice.Load() == unraisableNice }) {
					t.Fatalf("the task's thread never ran lowered (policy %d nice %d)", w.policy.Load(), w.nice.Load())
				}
				lowered := int(w.tid.Load())
				m.busy.Store(true)
				if !within(5*time.Second, func() bool { return s.Stats().Contended }) {
					t.Fatal("the guard never turned contended")
				}
				if !within(5*time.Second, func() bool { return int(w.tid.Load()) != lowered }) {
					t.Fatalf("the task stayed on thread %d (policy %d nice %d)", lowered, w.policy.Load(), w.nice.Load())
				}
				if landedLowered(w) {
					return 1
				}
				if loose := s.Stats().LooseThreads; loose != 0 {
					return loose // the thread went back to the pool, alive
				}
				// The runtime parks the main thread for good, where a
				// goroutine exits locked to it, rather than ending it.
				if lowered != os.Getpid() && !within(5*time.Second, func() bool { return !threadAlive(lowered) }) {
					t.Errorf("the lowered thread %d still exists", lowered)
				}
				if err := w.end(); err != nil {
					t.Fatal(err)
				}
				if st := s.Stats(); st.RetiredThreads != 1 || st.LooseThreads != 0 {
					t.Errorf("RetiredThreads %d, LooseThreads %d; want 1, 0", st.RetiredThreads, st.LooseThreads)
				}
				return 0
			})
		})
	}
}

// TestUnraisableParkedTasksLeaveOnWake: tasks that take turns on one slot,
// parked on their lowered threads when the guard turns contended, leave
// them when given their slot back, and go on to their end.
func TestUnraisableParkedTasksLeaveOnWake(t *testing.T) {
	retryLoose(t, func() uint64 {
		m := newFakeMachine(false)
		s := unraisableScheduler(t, m, WithWorkers(1), WithSlice(minSlice))
		a, b := startWatched(t, s, false), startWatched(t, s, false)
		if !within(5*time.Second, func() bool { return s.Stats().Preempted >= 4 }) {
			t.Fatal("the two tasks never took turns")
		}
		m.busy.Store(true)
		if !within(5*time.Second, func() bool { return s.Stats().Contended }) {
			t.Fatal("the guard never turned contended")
		}
		for _, w := range []*watchedTask{a, b} {
			if !within(5*time.Second, func() bool { return w.policy.Load() == unix.SCHED_NORMAL && w.nice.Load() == 0 }) {
				if st := s.Stats(); st.RetiredThreads+st.LooseThreads == 2 {
					return 1 // both left their threads: this one landed on a loose one
				}
				t.Errorf("a task stayed lowered (thread %d, nice %d)", w.tid.Load(), w.nice.Load())
			}
		}
		for _, w := range []*watchedTask{a, b} {
			if err := w.end(); err != nil {
				t.Fatal(err)
			}
		}
		st := s.Stats()
		if st.LooseThreads == 0 && st.RetiredThreads != 2 {
			t.Errorf("RetiredThreads %d, want 2", st.RetiredThreads)
		}
		return st.LooseThreads
	})
}

// landedLowered reports whether w's task, which has left its lowered
// thread, runs lowered still, a second later: its goroutine landed on a
// thread that an earlier retirement in this process left loose in the
// runtime's pool, lowered (retireLoose). The caller then counts the run as
// one that left a thread loose.
func landedLowered(w *watchedTask) bool {
	lowered := func() bool { return w.policy.Load() != unix.SCHED_NORMAL || w.nice.Load() != 0 }
	return lowered() && !within(time.Second, func() bool { return !lowered() })
}

// retryLoose runs scenario, which returns Stats.LooseThreads and checks
// the threads it retired only where none went loose, again until a run
// leaves no thread loose, up to three runs. retireThread may leave a
// lowered thread in the runtime's pool by chance (retire.go), more often
// beside busy processes; three runs in a row that do are a failure.
func retryLoose(t *testing.T, scenario func() (loose uint64)) {
	t.Helper()
	for run := 1; ; run++ {
		loose := scenario()
		if loose == 0 {
			return
		}
		if run == 3 {
			t.Errorf("LooseThreads %d in each of %d runs, want 0 in one at least: retireThread fails to end the lowered threads", loose, run)
			return
		}
		t.Logf("run %d: LooseThreads %d (a lowered thread went back to the pool); again", run, loose)
	}
}

// TestRetireThread: retireThread ends the calling goroutine's locked
// thread and leaves the goroutine unlocked on another. (The main thread,
// which the runtime parks for good instead of ending, is not used.)
func TestRetireThread(t *testing.T) {
	for range 20 {
		done := make(chan struct{})
		var before, after, how int
		go func() {
			defer close(done)
			runtime.LockOSThread()
			before = unix.Gettid()
			if before == unix.Getpid() {
				how = -1
				return // the main thread: leave it locked, the runtime parks it
			}
			how = retireThread()
			after = unix.Gettid()
		}()
		<-done
		if how == -1 {
			continue
		}
		if how != retireEnded || after == before {
			t.Fatalf("retireThread: %d, thread %d then %d; want retireEnded (%d) and another thread", how, before, after, retireEnded)
		}
		if !within(5*time.Second, func() bool { return !threadAlive(before) }) {
			t.Errorf("thread %d still exists", before)
		}
	}
}

// TestOnNormalThread: a goroutine that locks a lowered thread (one left
// loose in the pool) while contended ends it and goes on locked to a
// thread at normal priority; on a thread at normal priority it stays.
// Stats counts each retirement, ended or loose.
func TestOnNormalThread(t *testing.T) {
	s := unraisableScheduler(t, newFakeMachine(false))
	type result struct {
		before, after, nice int
		loose               bool // not lowered here, but on a thread a retirement left loose
		err                 error
	}
	run := func(lower bool) result {
		done := make(chan result)
		go func() {
			var r result
			defer func() { done <- r }()
			runtime.LockOSThread()
			r.before = unix.Gettid()
			if r.before == unix.Getpid() {
				r.err = errors.New("the main thread") // parked, not ended: not a case here
				return
			}
			if lower {
				if r.err = osprio.LowerNice(0, unraisableNice, 0); r.err != nil {
					return
				}
			} else if attr, err := unix.SchedGetAttr(0, 0); err == nil && attr.Nice != 0 {
				r.loose = true
			}
			s.onNormalThread()
			r.after = unix.Gettid()
			attr, err := unix.SchedGetAttr(0, 0)
			r.err, r.nice = err, int(attr.Nice)
			if err == nil && r.nice == 0 {
				runtime.UnlockOSThread()
			} // else exit locked: the runtime ends the lowered thread
		}()
		return <-done
	}
	// A retirement may leave the thread loose (retireThread), rarely; it
	// must then be counted so. Most must end their threads.
	const runs = 20
	ended := 0
	for range runs {
		st := s.Stats()
		r := run(true)
		if r.err != nil {
			ended++ // not a case here
			continue
		}
		if r.after == r.before || r.nice != 0 {
			t.Fatalf("lowered thread %d: on thread %d at nice %d after, want another at 0", r.before, r.after, r.nice)
		}
		now := s.Stats()
		if within(5*time.Second, func() bool { return !threadAlive(r.before) }) {
			ended++
			if now.RetiredThreads != st.RetiredThreads+1 {
				t.Errorf("thread %d ended; RetiredThreads %d, then %d", r.before, st.RetiredThreads, now.RetiredThreads)
			}
		} else if now.LooseThreads != st.LooseThreads+1 {
			t.Errorf("the lowered thread %d still exists, and LooseThreads went from %d to %d", r.before, st.LooseThreads, now.LooseThreads)
		}
		r = run(false)
		if r.err == nil && !r.loose && r.after != r.before {
			t.Errorf("a thread at normal priority was left: %d, then %d", r.before, r.after)
		}
	}
	if ended < runs/2 {
		t.Errorf("%d of %d lowered threads ended; the rest went back to the pool", ended, runs)
	}
}

// TestUnraisableThreadsAtNice: where a lowered thread cannot be raised, a
// hand-off thread goes to unraisableNice before its task, never to
// SCHED_IDLE, with unraisableSlice's kernel slice, whether its task
// yields or not, and goes back to the pool after it.
func TestUnraisableThreadsAtNice(t *testing.T) {
	m := newFakeMachine(false)
	s := unraisableScheduler(t, m, WithWorkers(1), withoutSlicePins())
	var tid int
	var attr *unix.SchedAttr
	compute := func(yield bool) func(*Task) error {
		return func(tk *Task) error {
			for end := time.Now().Add(20 * osLowerAfter); time.Now().Before(end); {
				if yield {
					if err := tk.Checkpoint(); err != nil {
						return err
					}
				}
			}
			tid = unix.Gettid()
			var err error
			attr, err = unix.SchedGetAttr(0, 0)
			return err
		}
	}
	if s.os.lowSlice == 0 && osprio.BaseSlice() > 0 {
		t.Error("the kernel has per-thread slices, and the hand-off threads' slice is 0")
	}
	for _, yield := range []bool{false, true} {
		if err := s.Run(context.Background(), compute(yield)); err != nil {
			t.Fatal(err)
		}
		if attr.Policy != unix.SCHED_NORMAL || attr.Nice != unraisableNice {
			t.Errorf("yield %v: the task ran at policy %d nice %d, want %d nice %d", yield, attr.Policy, attr.Nice, unix.SCHED_NORMAL, unraisableNice)
		}
		if want := s.os.lowSlice; want > 0 && time.Duration(attr.Runtime) != want {
			t.Errorf("yield %v: the task ran with a %v kernel slice, want %v (twice the kernel's)", yield, time.Duration(attr.Runtime), want)
		}
		if !threadAlive(tid) {
			t.Errorf("yield %v: its thread %d ended; want it back in the pool", yield, tid)
		}
	}
}
