package cpusched

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithIdleReleaseRange(t *testing.T) {
	for _, c := range []struct {
		d  time.Duration
		ok bool
	}{
		{minIdleRelease, true},
		{50 * time.Millisecond, true},
		{maxIdleRelease, true},
		{minIdleRelease - 1, false},
		{0, false},
		{-time.Second, false},
		{maxIdleRelease + 1, false},
	} {
		err := CheckTaskOptions(WithIdleRelease(c.d))
		if got := err == nil; got != c.ok {
			t.Errorf("WithIdleRelease(%v): error %v, want ok %v", c.d, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "1ms..10s") {
			t.Errorf("WithIdleRelease(%v): error %q does not name the range 1ms..10s", c.d, err)
		}
	}
}

// idleRig is a scheduler in IsolationOSPriority whose tasks are all
// handed off, with a fake clock and no monitor: the test runs the idle
// watch's passes itself (pass) and plays each task's thread clock
// (setCPU; a task with none set reads -1).
type idleRig struct {
	t   *testing.T
	s   *Scheduler
	clk *fakeClock
	cpu sync.Map // *Task -> *atomic.Int64
}

func newIdleRig(t *testing.T, workers int, opts ...Option) *idleRig {
	r := &idleRig{t: t, clk: newFakeClock()}
	r.s = newTestScheduler(t, append([]Option{WithIsolation(IsolationOSPriority), WithWorkers(workers),
		withClock(r.clk), withoutMonitor(), withCPUReading(r.reading)}, opts...)...)
	if r.s.os == nil {
		t.Skip("IsolationOSPriority is not available here")
	}
	return r
}

func (r *idleRig) reading(t *Task) int64 {
	if v, ok := r.cpu.Load(t); ok {
		return v.(*atomic.Int64).Load()
	}
	return -1
}

// setCPU sets task's thread clock to cpu.
func (r *idleRig) setCPU(task *Task, cpu int64) {
	v, _ := r.cpu.LoadOrStore(task, new(atomic.Int64))
	v.(*atomic.Int64).Store(cpu)
}

// pass runs the idle watch's part of a monitor pass now, and resumes the
// tasks it started.
func (r *idleRig) pass() {
	s := r.s
	s.mu.Lock()
	_, _, started := s.os.idleLocked(s.clock.Now())
	s.mu.Unlock()
	for _, st := range started {
		s.resume(st.t, st.first, wakeAny)
	}
}

// waitFor polls cond, failing the test after a while.
func (r *idleRig) waitFor(what string, cond func(Stats) bool) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond(r.s.Stats()) {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s: %+v", what, r.s.Stats())
		}
		time.Sleep(time.Millisecond)
	}
}

// sleeper starts a task with WithIdleRelease(d) that sets its clock to
// 0, reports its *Task on started, sleeps without Blocking until wake
// is closed, then runs then (its clock moved on by the test or not).
func (r *idleRig) sleeper(d time.Duration, started chan<- *Task, wake <-chan struct{}, then func(*Task) error) *Handle {
	h, err := r.s.Go(context.Background(), func(task *Task) error {
		r.setCPU(task, 0)
		started <- task
		<-wake
		return then(task)
	}, WithIdleRelease(d))
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// holder starts a task that holds its slot until release is closed.
func (r *idleRig) holder(release <-chan struct{}, ran *atomic.Bool) *Handle {
	h, err := r.s.Go(context.Background(), func(task *Task) error {
		ran.Store(true)
		<-release
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

// TestIdleReleaseAndRetake walks the idle watch through a release and a
// retake by the monitor: the sleeping task's slot goes to the queued task
// once its clock has not moved for d, it counts as blocked, and once its
// clock moves it takes a slot back past Workers until the other task ends.
func TestIdleReleaseAndRetake(t *testing.T) {
	r := newIdleRig(t, 1)
	const d = 2 * time.Millisecond
	started, wake, release := make(chan *Task, 1), make(chan struct{}), make(chan struct{})
	h := r.sleeper(d, started, wake, func(task *Task) error { return task.Checkpoint() })
	task := <-started
	var ran atomic.Bool
	hb := r.holder(release, &ran)

	r.pass() // the look begins
	r.clk.Advance(int64(d) - 1)
	r.pass()
	if st := r.s.Stats(); st.IdleReleases != 0 || ran.Load() {
		t.Fatalf("released before d: %+v", st)
	}
	r.clk.Advance(1)
	v0 := task.ent.vruntime
	r.pass()
	r.waitFor("the queued task to run", func(Stats) bool { return ran.Load() })
	st := r.s.Stats()
	if st.IdleReleases != 1 || st.Blocked != 1 || st.Running != 1 {
		t.Fatalf("after the release: IdleReleases %d, Blocked %d, Running %d; want 1, 1, 1", st.IdleReleases, st.Blocked, st.Running)
	}
	r.s.mu.Lock()
	charged := task.ent.vruntime - v0
	r.s.mu.Unlock()
	if want := int64(d) / minChargeDivisor; charged != want {
		t.Errorf("the idle stretch was charged %v, want a quarter of it, %v", time.Duration(charged), time.Duration(want))
	}
	r.pass() // asleep still: nothing changes
	if st := r.s.Stats(); st.Blocked != 1 {
		t.Fatalf("retaken while asleep: %+v", st)
	}

	r.setCPU(task, int64(d)/2) // it computes again
	r.clk.Advance(int64(d))
	r.pass()
	st = r.s.Stats()
	if st.Running != 2 || st.Blocked != 0 {
		t.Fatalf("after the retake: Running %d, Blocked %d; want 2 (past Workers), 0", st.Running, st.Blocked)
	}
	r.s.mu.Lock()
	if got := r.clk.Now() - task.since; got != int64(d)/2 {
		t.Errorf("the stretch after the retake begins %v back, want the CPU used since the release, %v", time.Duration(got), d/2)
	}
	r.s.mu.Unlock()
	close(release)
	if err := hb.Wait(); err != nil {
		t.Fatal(err)
	}
	close(wake)
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	st = r.s.Stats()
	if st.Running != 0 || st.Blocked != 0 || st.Completed != 2 {
		t.Errorf("at the end: Running %d, Blocked %d, Completed %d; want 0, 0, 2", st.Running, st.Blocked, st.Completed)
	}
	checkIdentity(t, st)
}

// TestIdleSettles checks that a released task whose goroutine comes to the
// scheduler before the monitor sees its clock move takes a slot back
// there and goes on as usual: at a Checkpoint (where, past Workers, it
// gives the slot up and waits for one), in a Blocking call, and at its
// end.
func TestIdleSettles(t *testing.T) {
	for _, c := range []struct {
		name string
		then func(*Task) error
	}{
		{"Checkpoint", func(task *Task) error { return task.Checkpoint() }},
		{"Blocking", func(task *Task) error {
			task.Blocking(func() {})
			return task.Checkpoint()
		}},
		{"end", func(*Task) error { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newIdleRig(t, 1)
			const d = time.Millisecond
			started, wake, release := make(chan *Task, 1), make(chan struct{}), make(chan struct{})
			h := r.sleeper(d, started, wake, c.then)
			<-started
			var ran atomic.Bool
			hb := r.holder(release, &ran)
			r.pass()
			r.clk.Advance(int64(d))
			r.pass()
			r.waitFor("the queued task to run", func(Stats) bool { return ran.Load() })
			close(wake) // it wakes, the monitor has not seen it
			r.waitFor("the released task to settle", func(st Stats) bool { return st.Blocked == 0 })
			close(release)
			for _, h := range []*Handle{hb, h} {
				if err := h.Wait(); err != nil {
					t.Fatal(err)
				}
			}
			st := r.s.Stats()
			if st.IdleReleases != 1 || st.Running != 0 || st.Blocked != 0 || st.Completed != 2 {
				t.Errorf("IdleReleases %d, Running %d, Blocked %d, Completed %d; want 1, 0, 0, 2", st.IdleReleases, st.Running, st.Blocked, st.Completed)
			}
			checkIdentity(t, st)
		})
	}
}

// TestIdleKeepsSlotWithoutWaiters checks that the watch releases nothing
// while no task waits, nor a task whose clock moves.
func TestIdleKeepsSlotWithoutWaiters(t *testing.T) {
	r := newIdleRig(t, 2)
	const d = time.Millisecond
	started, wake := make(chan *Task, 2), make(chan struct{})
	h1 := r.sleeper(d, started, wake, func(*Task) error { return nil })
	h2 := r.sleeper(d, started, wake, func(*Task) error { return nil })
	<-started
	busy := <-started
	for i := range 5 {
		r.pass()
		r.setCPU(busy, int64(i+1)*int64(d))
		r.clk.Advance(int64(d))
	}
	if st := r.s.Stats(); st.IdleReleases != 0 {
		t.Errorf("released %d slots with no task waiting", st.IdleReleases)
	}
	release := make(chan struct{})
	var ran atomic.Bool
	hb := r.holder(release, &ran) // waits now
	r.pass()
	r.clk.Advance(int64(d))
	r.setCPU(busy, int64(10*d))
	r.pass()
	r.waitFor("the queued task to run", func(Stats) bool { return ran.Load() })
	if st := r.s.Stats(); st.IdleReleases != 1 {
		t.Errorf("released %d slots, want 1: the sleeping task's, not the computing one's", st.IdleReleases)
	}
	close(wake)
	close(release)
	for _, h := range []*Handle{h1, h2, hb} {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	checkIdentity(t, r.s.Stats())
}

// TestIdleKeepsSlotWhileRunnable: a watched task whose clock stands still
// while its thread is runnable (the kernel runs busier threads: a
// lowered thread, or one at nice 10) keeps its slot; once its thread
// sleeps, it gives it up.
func TestIdleKeepsSlotWhileRunnable(t *testing.T) {
	var runnable atomic.Bool
	runnable.Store(true)
	src := newRealGuardSource()
	src.threadWait = func(int) (int64, bool, bool) { return 0, runnable.Load(), true }
	r := newIdleRig(t, 1, withGuardSource(src))
	const d = time.Millisecond
	started, wake, release := make(chan *Task, 1), make(chan struct{}), make(chan struct{})
	h := r.sleeper(d, started, wake, func(*Task) error { return nil })
	<-started
	var ran atomic.Bool
	hb := r.holder(release, &ran) // waits
	for range 5 {
		r.pass()
		r.clk.Advance(int64(d))
	}
	if st := r.s.Stats(); st.IdleReleases != 0 || ran.Load() {
		t.Fatalf("a runnable thread's slot was given up: %+v", st)
	}
	runnable.Store(false)
	r.pass()
	r.clk.Advance(int64(d))
	r.pass()
	r.waitFor("the queued task to run", func(Stats) bool { return ran.Load() })
	if st := r.s.Stats(); st.IdleReleases != 1 {
		t.Errorf("IdleReleases %d once the thread sleeps, want 1", st.IdleReleases)
	}
	close(wake)
	close(release)
	for _, h := range []*Handle{h, hb} {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	checkIdentity(t, r.s.Stats())
}

// TestIdleWaitsForFn checks that the watch gives up no slot of a task
// whose fn has not begun: a hand-off thread has its tid before fn, while
// the scheduler's own steps run on it, and its clock standing still then
// says nothing of fn (here the played clock stands at 0 throughout).
func TestIdleWaitsForFn(t *testing.T) {
	gate, atGate := make(chan struct{}), make(chan struct{}, 1)
	var held atomic.Bool
	hook := withBeginFn(func(*Task) {
		if held.CompareAndSwap(false, true) {
			atGate <- struct{}{}
			<-gate
		}
	})
	r := newIdleRig(t, 1, hook)
	r.s.cfg.hooks.cpuReading = func(*Task) int64 { return 0 }
	const d = time.Millisecond
	var began atomic.Bool
	wake := make(chan struct{})
	h, err := r.s.Go(context.Background(), func(task *Task) error {
		began.Store(true)
		<-wake // asleep, its clock still
		return nil
	}, WithIdleRelease(d))
	if err != nil {
		t.Fatal(err)
	}
	<-atGate // its thread has its tid, fn has not begun
	var ran atomic.Bool
	release := make(chan struct{})
	hb := r.holder(release, &ran) // waits
	for range 5 {
		r.pass()
		r.clk.Advance(int64(d))
	}
	if st := r.s.Stats(); st.IdleReleases != 0 || ran.Load() {
		t.Fatalf("a slot was given up before fn began: %+v", st)
	}
	close(gate)
	for !began.Load() {
		time.Sleep(100 * time.Microsecond)
	}
	r.pass() // the look begins
	r.clk.Advance(int64(d))
	r.pass()
	r.waitFor("the queued task to run", func(Stats) bool { return ran.Load() })
	if st := r.s.Stats(); st.IdleReleases != 1 {
		t.Errorf("IdleReleases %d once fn sleeps, want 1", st.IdleReleases)
	}
	close(wake)
	close(release)
	for _, h := range []*Handle{h, hb} {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	checkIdentity(t, r.s.Stats())
}
