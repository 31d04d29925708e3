package cpusched

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// shareRun runs one task per spec on a single worker with a fake clock:
// each task works in steps of `step` (advancing the clock and ending slices
// as the monitor would) and calls Checkpoint, until total fake time has
// passed. It returns the slot time each task got, by the scheduler's own
// accounting of who held the slot while the clock moved.
func shareRun(t *testing.T, total time.Duration, setup func(*Scheduler), specs ...[]TaskOption) []time.Duration {
	t.Helper()
	return shareRunWith(t, total, nil, setup, nil, specs...)
}

// shareRunWith is shareRun with opts added to New's, and each step of task
// i also passed to onStep, if set, before its Checkpoint.
func shareRunWith(t *testing.T, total time.Duration, opts []Option, setup func(*Scheduler), onStep func(i int, task *Task, step int64), specs ...[]TaskOption) []time.Duration {
	t.Helper()
	clk := newFakeClock()
	s := newTestScheduler(t, append([]Option{WithWorkers(1), withClock(clk), withoutMonitor()}, opts...)...)
	if setup != nil {
		setup(s)
	}
	const step = int64(100 * time.Microsecond)
	got := make([]atomic.Int64, len(specs))
	end := clk.Now() + int64(total)

	// A gate task holds the slot until every task is queued, so they start
	// together.
	release, gate := holdSlot(t, s)
	var wg sync.WaitGroup
	for i, opts := range specs {
		h, err := s.Go(context.Background(), func(task *Task) error {
			for clk.Now() < end {
				clk.Advance(step)
				got[i].Add(step)
				if onStep != nil {
					onStep(i, task, step)
				}
				task.s.tick()
				if err := task.Checkpoint(); err != nil {
					return err
				}
			}
			return nil
		}, opts...)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); h.Wait() }()
	}
	release()
	gate.Wait()
	wg.Wait()
	out := make([]time.Duration, len(specs))
	for i := range got {
		out[i] = time.Duration(got[i].Load())
	}
	return out
}

// checkRatios checks that got is proportional to want within tol (relative).
func checkRatios(t *testing.T, got []time.Duration, want []float64, tol float64) {
	t.Helper()
	var gsum, wsum float64
	for i := range got {
		gsum += float64(got[i])
		wsum += want[i]
	}
	for i := range got {
		g, w := float64(got[i])/gsum, want[i]/wsum
		if g < w*(1-tol) || g > w*(1+tol) {
			t.Errorf("task %d got %.1f%% of the slot time, want %.1f%% (±%.0f%%); all: %v", i, 100*g, 100*w, 100*tol, got)
		}
	}
}

func TestNiceShares(t *testing.T) {
	got := shareRun(t, 3*time.Second, nil,
		[]TaskOption{WithNice(0)}, []TaskOption{WithNice(5)}, []TaskOption{WithNice(10)})
	checkRatios(t, got, []float64{1024, 335, 110}, 0.10)
}

func TestGroupShares(t *testing.T) {
	got := shareRun(t, 3*time.Second, func(s *Scheduler) {
		if err := s.SetGroupWeight("b", 300); err != nil {
			t.Fatal(err)
		}
	},
		// Group a has three tasks, b one: groups share first, 1:3.
		[]TaskOption{WithGroup("a")}, []TaskOption{WithGroup("a")}, []TaskOption{WithGroup("a")},
		[]TaskOption{WithGroup("b")})
	a := got[0] + got[1] + got[2]
	checkRatios(t, []time.Duration{a, got[3]}, []float64{100, 300}, 0.10)
}

func TestRealtimeFirstButThrottled(t *testing.T) {
	got := shareRun(t, 4*time.Second, nil,
		[]TaskOption{WithClass(ClassRealtime)}, []TaskOption{WithClass(ClassNormal)})
	// Realtime takes 95% of each 1 s period while normal waits; normal
	// keeps the remaining 5%.
	checkRatios(t, got, []float64{95, 5}, 0.15)
}

func TestIdleProgressesButYields(t *testing.T) {
	got := shareRun(t, 4*time.Second, nil,
		[]TaskOption{WithClass(ClassNormal)}, []TaskOption{WithClass(ClassIdle)})
	idle := float64(got[1]) / float64(got[0]+got[1])
	if idle <= 0 || idle > 0.02 {
		t.Errorf("idle task got %.2f%% of the slot time against a normal one, want >0 and <=2%% (guarantee %.2f%%)", 100*idle, 100*idleShare)
	}
}

func TestBatchSharesLikeNormal(t *testing.T) {
	got := shareRun(t, 3*time.Second, nil,
		[]TaskOption{WithClass(ClassNormal)}, []TaskOption{WithClass(ClassBatch)})
	checkRatios(t, got, []float64{1, 1}, 0.10)
}

// TestShortSliceMeansEarlierDeadline: a task asking for short slices gets
// the slot back sooner after each wait, but not more CPU.
func TestShortSliceSameShare(t *testing.T) {
	got := shareRun(t, 3*time.Second, nil,
		[]TaskOption{WithTaskSlice(100 * time.Microsecond)}, []TaskOption{WithTaskSlice(4 * time.Millisecond)})
	checkRatios(t, got, []float64{1, 1}, 0.10)
}

// longSteps returns a task body that, until stop is closed, calls step,
// advances clk by d, ends the slices that are over (as the monitor would)
// and calls Checkpoint.
func longSteps(clk *fakeClock, stop <-chan struct{}, step func(), d time.Duration) func(*Task) error {
	return func(task *Task) error {
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			step()
			clk.Advance(int64(d))
			task.s.tick()
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
	}
}

// bothPast reports whether L1 and L2 each appear at least n times in order.
func bothPast(order []string, n int) bool {
	count := map[string]int{}
	for _, x := range order {
		count[x]++
	}
	return count["L1"] >= n && count["L2"] >= n
}

// TestNewTaskRunsBeforeOldOnes: with one worker busy with long tasks, a new
// small task gets the slot at the next slice end, ahead of the long tasks
// that are waiting for their turn again.
func TestNewTaskRunsNext(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	var order []string
	var mu sync.Mutex
	note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	stop := make(chan struct{})
	h1, _ := s.Go(context.Background(), longSteps(clk, stop, func() { note("L1") }, 500*time.Microsecond))
	h2, _ := s.Go(context.Background(), longSteps(clk, stop, func() { note("L2") }, 500*time.Microsecond))
	// Both long tasks past their first slice (2 steps): a long task still
	// in it would be served first, first come, first served.
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return bothPast(order, 4) })
	mu.Lock() // S is queued between two steps of a long task
	arrival := len(order)
	small, _ := s.Go(context.Background(), func(*Task) error { note("S"); return nil })
	mu.Unlock()
	small.Wait()
	close(stop)
	h1.Wait()
	h2.Wait()
	mu.Lock()
	defer mu.Unlock()
	for i, x := range order {
		if x == "S" {
			// At most one more step of a long task (the one holding the
			// slot when S arrived, to its slice end) may come first.
			n := i - arrival
			// S arrived while one long task held the slot: only the rest of
			// that task's slice (2 steps) may come first; the other long
			// task, waiting, must not (new tasks start a slice ahead).
			if n > 2 {
				t.Errorf("small task waited %d long-task steps after arriving, want at most 2; order %v", n, order[max(0, i-10):i+1])
			}
			return
		}
	}
	t.Errorf("small task never ran; order %v", order)
}

func TestRealtimePreemptsAtOnce(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	running := make(chan struct{})
	var rtRan atomic.Bool
	var checkpointsAfterRT atomic.Int64
	hn, _ := s.Go(context.Background(), func(task *Task) error {
		close(running)
		for !rtRan.Load() {
			if err := task.Checkpoint(); err != nil { // no clock advance: slice never ends
				return err
			}
			checkpointsAfterRT.Add(1)
			time.Sleep(10 * time.Microsecond)
		}
		return nil
	})
	<-running
	if err := s.Run(context.Background(), func(*Task) error { rtRan.Store(true); return nil }, WithClass(ClassRealtime)); err != nil {
		t.Fatal(err)
	}
	if err := hn.Wait(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Preempted != 1 {
		t.Errorf("Preempted = %d, want 1 (the normal task yields to realtime before its slice ends)", st.Preempted)
	}
}

func TestBlockingMakesDeadlinesEarlier(t *testing.T) {
	task := &Task{slice: int32(time.Millisecond)}
	if got := requestSlice(task, false); got != int64(time.Millisecond) {
		t.Errorf("no history: request %v, want the full slice", time.Duration(got))
	}
	task.avgBurst, task.avgWait = int64(100*time.Microsecond), int64(300*time.Microsecond)
	if got, want := requestSlice(task, false), int64(250*time.Microsecond); got != want {
		t.Errorf("burst 100us, wait 300us: request %v, want %v", time.Duration(got), time.Duration(want))
	}
	task.avgBurst, task.avgWait = int64(time.Microsecond), int64(time.Second)
	if got, want := requestSlice(task, false), int64(time.Millisecond/minLatencyFactor); got != want {
		t.Errorf("tiny bursts: request %v, want the floor %v", time.Duration(got), time.Duration(want))
	}
	if got, want := requestSlice(task, true), int64(time.Millisecond/firstSliceDivisor); got != want {
		t.Errorf("first slice %v, want %v", time.Duration(got), time.Duration(want))
	}
}

func TestNiceWeightTable(t *testing.T) {
	for _, tt := range []struct {
		nice int
		want int64
	}{{-20, 88761}, {0, 1024}, {5, 335}, {10, 110}, {19, 15}} {
		if got := niceWeight(tt.nice); got != tt.want {
			t.Errorf("niceWeight(%d) = %d, want %d", tt.nice, got, tt.want)
		}
	}
	for n := MinNice; n < MaxNice; n++ {
		r := float64(niceWeight(n)) / float64(niceWeight(n+1))
		if r < 1.19 || r > 1.31 {
			t.Errorf("weight(%d)/weight(%d) = %.3f, want about 1.25", n, n+1, r)
		}
	}
}

// TestNewTaskPreemptsLongRunner pins wakeup preemption: a new Normal task
// makes a task past its first slice come to its next Checkpoint before its
// slice ends, but never one still in its first slice.
func TestNewTaskPreemptsLongRunner(t *testing.T) {
	for _, pastFirst := range []bool{true, false} {
		clk := newFakeClock()
		s := newTestScheduler(t, WithWorkers(1), WithSlice(10*time.Millisecond), withClock(clk), withoutMonitor())
		ready := make(chan struct{})
		var smallRan atomic.Bool
		var checkpointsBeforeSmall atomic.Int64
		h, _ := s.Go(context.Background(), func(task *Task) error {
			if pastFirst {
				// Outlive the first slice (10 ms) with nobody waiting: the
				// slice is renewed at the Checkpoint.
				clk.Advance(int64(11 * time.Millisecond))
				task.s.tick()
				if err := task.Checkpoint(); err != nil {
					return err
				}
			}
			close(ready)
			deadline := time.Now().Add(200 * time.Millisecond)
			for !smallRan.Load() && time.Now().Before(deadline) {
				if err := task.Checkpoint(); err != nil { // the clock stands still: no slice end
					return err
				}
				checkpointsBeforeSmall.Add(1)
				time.Sleep(20 * time.Microsecond)
			}
			return nil
		})
		<-ready
		small, _ := s.Go(context.Background(), func(*Task) error { smallRan.Store(true); return nil })
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
		small.Wait()
		got := s.Stats().Preempted
		if pastFirst && got != 1 {
			t.Errorf("long runner: Preempted = %d, want 1 (the new task runs at the next Checkpoint)", got)
		}
		if !pastFirst && got != 0 {
			t.Errorf("task in its first slice: Preempted = %d, want 0", got)
		}
	}
}

// TestLaneServesSmallTasksInArrivalOrder: with one worker shared by two
// long tasks, small tasks that arrive while a long task runs get the slot
// at its next Checkpoint, one after the other in the order they came,
// before the long task that waits (whatever its deadline).
func TestLaneServesSmallTasksInArrivalOrder(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	var mu sync.Mutex
	var order []string
	note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	stop := make(chan struct{})
	h1, _ := s.Go(context.Background(), longSteps(clk, stop, func() { note("L1") }, 100*time.Microsecond))
	h2, _ := s.Go(context.Background(), longSteps(clk, stop, func() { note("L2") }, 100*time.Microsecond))
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return bothPast(order, 20) })
	mu.Lock() // the small tasks are queued between two steps of a long task
	arrival := len(order)
	var smalls []*Handle
	for _, name := range []string{"S1", "S2", "S3"} {
		h, err := s.Go(context.Background(), func(*Task) error {
			note(name)
			clk.Advance(int64(200 * time.Microsecond))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		smalls = append(smalls, h)
	}
	mu.Unlock()
	for _, h := range smalls {
		h.Wait()
	}
	close(stop)
	h1.Wait()
	h2.Wait()
	mu.Lock()
	defer mu.Unlock()
	// At most the step of the long task holding the slot as they arrived
	// (it was past its first slice, so asked to yield at once).
	got := order[arrival:]
	i := slices.Index(got, "S1")
	if i < 0 || i > 1 || len(got) < i+3 || !slices.Equal(got[i:i+3], []string{"S1", "S2", "S3"}) {
		t.Errorf("after the small tasks arrived: %v, want at most one long step, then S1 S2 S3", got[:min(len(got), 8)])
	}
}

// TestLaneAsksEveryRunnerOneYields: a small task that arrives while two
// long tasks past their first slice hold both slots asks both to come to
// their next Checkpoint; the first to come hands its slot over, the other
// finds the lane empty and goes on.
func TestLaneAsksEveryRunnerOneYields(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(2), WithSlice(10*time.Millisecond), withClock(clk), withoutMonitor())
	var started, ready sync.WaitGroup
	started.Add(2)
	ready.Add(2)
	outlived, resume := make(chan struct{}), make(chan struct{})
	var smallRan atomic.Bool
	var longs []*Handle
	for range 2 {
		h, err := s.Go(context.Background(), func(task *Task) error {
			// Outlive the first slice (10 ms) with nobody waiting; the
			// clock moves once, so that no slice ends later on.
			started.Done()
			<-outlived
			task.s.tick()
			if err := task.Checkpoint(); err != nil {
				return err
			}
			ready.Done()
			<-resume
			deadline := time.Now().Add(5 * time.Second)
			for !smallRan.Load() && time.Now().Before(deadline) {
				if err := task.Checkpoint(); err != nil { // the clock stands still: no slice end
					return err
				}
				time.Sleep(20 * time.Microsecond)
			}
			return task.Checkpoint() // the one that did not yield: the lane is empty now
		})
		if err != nil {
			t.Fatal(err)
		}
		longs = append(longs, h)
	}
	started.Wait()
	clk.Advance(int64(11 * time.Millisecond))
	close(outlived)
	ready.Wait()
	small, err := s.Go(context.Background(), func(*Task) error { smallRan.Store(true); return nil })
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	asked := 0
	for _, r := range s.running {
		if r.preempt.Load()&preemptLane != 0 {
			asked++
		}
	}
	s.mu.Unlock()
	if asked != 2 {
		t.Errorf("%d running tasks asked to make room for the lane, want 2", asked)
	}
	close(resume)
	small.Wait()
	for _, h := range longs {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Stats().Preempted; got != 1 {
		t.Errorf("Preempted = %d, want 1 (one long task hands its slot over, the other goes on)", got)
	}
}

// TestLaneTakesTasksWithinTheirFirstSlice: which tasks wait in the lane.
func TestLaneTakesTasksWithinTheirFirstSlice(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1), WithSlice(time.Millisecond), withClock(newFakeClock()), withoutMonitor())
	for _, tc := range []struct {
		name    string
		opts    []TaskOption
		runTime time.Duration
		want    bool
	}{
		{"new normal task", nil, 0, true},
		{"normal, just under a slice", nil, time.Millisecond - 1, true},
		{"normal, a slice used", nil, time.Millisecond, false},
		{"batch", []TaskOption{WithClass(ClassBatch)}, 0, false},
		{"realtime", []TaskOption{WithClass(ClassRealtime)}, 0, false},
		{"idle", []TaskOption{WithClass(ClassIdle)}, 0, false},
		{"own long slice, past the scheduler's", []TaskOption{WithTaskSlice(maxSlice)}, time.Millisecond, false},
		{"own short slice, past it", []TaskOption{WithTaskSlice(100 * time.Microsecond)}, 100 * time.Microsecond, false},
		{"own short slice, within it", []TaskOption{WithTaskSlice(100 * time.Microsecond)}, 50 * time.Microsecond, true},
	} {
		task, _, err := s.newTask(context.Background(), func(*Task) error { return nil }, tc.opts, true)
		if err != nil {
			t.Fatal(err)
		}
		task.runTime = int64(tc.runTime)
		if got := s.rq.small(task); got != tc.want {
			t.Errorf("%s, %v used: small = %v, want %v", tc.name, tc.runTime, got, tc.want)
		}
	}
	// With 10 ms slices (IsolationOSPriority's), the lane still serves 1 ms.
	s10 := newTestScheduler(t, WithWorkers(1), WithSlice(osPrioritySlice), withClock(newFakeClock()), withoutMonitor())
	task, _, err := s10.newTask(context.Background(), func(*Task) error { return nil }, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, used := range []time.Duration{DefaultSlice - 1, DefaultSlice} {
		task.runTime = int64(used)
		if got, want := s10.rq.small(task), used < DefaultSlice; got != want {
			t.Errorf("10 ms slices, %v used: small = %v, want %v", used, got, want)
		}
	}
}

// TestLaneServesStartedTasksFirst: a small task back from Blocking goes
// before the small tasks that never ran, though they came first: the lane
// finishes what it started.
func TestLaneServesStartedTasksFirst(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	var mu sync.Mutex
	var order []string
	note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
	aRunning, queued, back, bRunning, bDone := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan struct{})
	var taskA *Task
	ha, _ := s.Go(context.Background(), func(tk *Task) error {
		taskA = tk
		note("A")
		close(aRunning)
		<-queued
		tk.Blocking(func() { <-back })
		note("A again")
		return nil
	})
	<-aRunning
	hb, _ := s.Go(context.Background(), func(*Task) error { note("B"); close(bRunning); <-bDone; return nil })
	hc, _ := s.Go(context.Background(), func(*Task) error { note("C"); return nil })
	close(queued) // A gives its slot up: B, the oldest new task, gets it
	<-bRunning
	clk.Advance(int64(100 * time.Microsecond))
	close(back) // A comes back and waits, after C, for the slot
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return taskA.state == stateParked })
	close(bDone)
	for _, h := range []*Handle{ha, hb, hc} {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"A", "B", "A again", "C"}; !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
}
