//go:build linux

// IsolationOSPriority's hand-off of tasks to hand-off threads: the workers, their slots and Blocking calls.

package cpusched

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestRunWhileWorkersParkIsRaceFree pins a data race: in
// IsolationOSPriority, Run read its task's wake channel field without the
// lock while the task's worker made that channel when the task first parked
// at a Checkpoint or came back from Blocking. Run now waits only on the
// task's done channel. Run with -race.
func TestRunWhileWorkersParkIsRaceFree(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1), WithSlice(minSlice))
	var started atomic.Int64
	runConcurrently(t, s, 200, func(tk *Task) error {
		if started.Add(1)%2 == 0 { // every other task
			tk.Blocking(func() { time.Sleep(10 * time.Microsecond) })
		}
		return checkpointFor(50 * time.Microsecond)(tk)
	})
}

// TestOSWorkerHandOff drives the worker hand-off (handoffThread) from both
// sides: a dispatcher gives tasks to a worker right away (while it spins)
// or after pauses longer than threadSpin (once it has parked). Every task
// must arrive once and in order, and both ways must have been taken. Run
// with -race.
func TestOSWorkerHandOff(t *testing.T) {
	const n = 3000
	w := &handoffThread{next: make(chan *Task, 1)}
	idle := make(chan *handoffThread, 1) // stands for s.os.idleThreads
	tasks := make([]*Task, n)
	for i := range tasks {
		tasks[i] = &Task{runIdx: int16(i)}
	}
	got := make(chan int16, n)
	bare := &Scheduler{os: &osMode{}} // a bare Scheduler, no slice pins: never pinned here
	go func() {
		for {
			w.state.Store(threadSpinning)
			idle <- w
			tk := w.await(bare)
			if tk == stopThread {
				close(got)
				return
			}
			got <- tk.runIdx
		}
	}()
	var awake, parked int
	for i, tk := range tasks {
		if i%10 == 9 {
			time.Sleep(2 * threadSpin)
		}
		if (<-idle).give(bare, tk, false) {
			awake++
		} else {
			parked++
		}
	}
	(<-idle).give(bare, stopThread, false)
	next := int16(0)
	for idx := range got {
		if idx != next {
			t.Fatalf("task %d arrived after task %d", idx, next-1)
		}
		next++
	}
	if next != n {
		t.Fatalf("%d of %d tasks arrived", next, n)
	}
	t.Logf("%d given to a spinning worker, %d to a parked one", awake, parked)
	if awake == 0 || parked == 0 {
		t.Errorf("awake %d, parked %d: want both ways taken", awake, parked)
	}
}

// TestIdleOSWorkersPark checks that the workers' spin after a task is
// bounded: once the tasks have ended, every idle worker parks (an idle
// scheduler costs no CPU).
func TestIdleOSWorkersPark(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(2))
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range s.os.idleThreads {
			if w.state.Load() != threadWaiting {
				return false
			}
		}
		return len(s.os.idleThreads) > 0
	})
}

// TestBlockingHoldGivesTheSlotUp: where IsolationOSPriority hands tasks
// to hand-off threads (and for tasks on lowered threads), a Blocking call
// after a short one keeps the task's slot; when another task waits and fn is still
// running blockHold later, the slot goes to that task. Here fn waits for
// the other task to have run, so without the release it would wait
// forever.
func TestBlockingHoldGivesTheSlotUp(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1))
	inBlocking := make(chan struct{})
	otherRan := make(chan struct{})
	h, err := s.Go(context.Background(), func(tk *Task) error {
		tk.Blocking(func() {}) // a first, short call: the next one keeps the slot
		tk.Blocking(func() {
			close(inBlocking)
			select {
			case <-otherRan:
			case <-time.After(10 * time.Second):
				t.Error("the other task did not run while the slot was kept")
			}
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-inBlocking
	if err := s.Run(context.Background(), func(*Task) error { close(otherRan); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestShortBlockingCallsKeepTheSlot: where IsolationOSPriority hands tasks
// to hand-off threads (and for tasks on lowered threads), a Blocking call
// keeps the task's slot while the task's earlier calls have been
// short (a moving average under blockHold), even with another task
// waiting, and gives it up at once after long ones and on the first call. (Whether the slot then stays kept
// depends on the hand-off thread getting the CPU within blockHold, which a
// SCHED_IDLE thread on a busy machine need not, so the test checks how
// each call began.)
func TestShortBlockingCallsKeepTheSlot(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1))
	started := make(chan struct{})
	release := make(chan struct{})
	var kept []bool
	h, err := s.Go(context.Background(), func(tk *Task) error {
		close(started)
		<-release
		for _, avg := range []time.Duration{0, time.Microsecond, blockHold / 2, blockHold} {
			tk.blockAvg = int64(avg) // as if its earlier calls took avg
			tk.Blocking(func() { kept = append(kept, tk.hold.Load() != holdNone) })
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	other, err := s.Go(context.Background(), func(*Task) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return s.Stats().Queued == 1 })
	close(release)
	if err := other.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); err != nil {
		t.Fatal(err)
	}
	if want := []bool{false, true, true, false}; fmt.Sprint(kept) != fmt.Sprint(want) {
		t.Errorf("Blocking calls kept the slot: %v, want %v (moving averages none yet, 1 us, blockHold/2, blockHold)", kept, want)
	}
}

// TestLaneCountsCPUTimeInOSPriority: a task that holds its slot for 5 ms
// without using the CPU (here it sleeps; on a busy machine its SCHED_IDLE
// thread may simply not run) is still within its first slice in
// IsolationOSPriority, where the lane counts the hand-off thread's CPU time,
// so a new small task does not take its slot at its next Checkpoint. In
// IsolationReserve, which counts slot time, it does. (A task on its own
// goroutine counts at most osLowerAfter until its thread is lowered,
// TestSetCPUOfOwnTasks; the hand-off threads of the hand-off are where this
// test's premise is about the CPU clock from the start.)
func TestLaneCountsCPUTimeInOSPriority(t *testing.T) {
	for _, mode := range []Isolation{IsolationOSPriority, IsolationReserve} {
		t.Run(mode.String(), func(t *testing.T) {
			s, err := New(WithIsolation(mode), WithWorkers(1), withOSHandoff())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			var mu sync.Mutex
			var order []string
			note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
			slept, queued := make(chan struct{}), make(chan struct{})
			ha, err := s.Go(context.Background(), func(tk *Task) error {
				time.Sleep(5 * time.Millisecond)
				close(slept)
				<-queued
				if err := tk.Checkpoint(); err != nil {
					return err
				}
				note("A")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			<-slept
			hb, err := s.Go(context.Background(), func(*Task) error { note("B"); return nil })
			if err != nil {
				t.Fatal(err)
			}
			close(queued)
			if err := ha.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := hb.Wait(); err != nil {
				t.Fatal(err)
			}
			want := []string{"A", "B"}
			if mode == IsolationReserve {
				want = []string{"B", "A"}
			}
			if !slices.Equal(order, want) {
				t.Errorf("order %v, want %v", order, want)
			}
		})
	}
}

// TestFirstBlockingCallFollowsTheOthers: where IsolationOSPriority hands
// tasks to hand-off threads, a task's first Blocking call keeps the slot
// when the scheduler's recent calls were short, and gives it up when they
// were long.
func TestFirstBlockingCallFollowsTheOthers(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1))
	firstKept := func(d time.Duration) bool {
		for range 8 { // calls of d by other tasks
			if err := s.Run(context.Background(), func(tk *Task) error {
				tk.Blocking(func() { time.Sleep(d) })
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
		var kept bool
		s.Run(context.Background(), func(tk *Task) error {
			tk.Blocking(func() { kept = tk.hold.Load() != holdNone })
			return nil
		})
		return kept
	}
	if !firstKept(0) {
		t.Error("after short calls, a task's first Blocking call gave its slot up")
	}
	if firstKept(2 * time.Millisecond) {
		t.Error("after 2 ms calls, a task's first Blocking call kept its slot")
	}
}

// TestLoweredThreadsYieldOnWake: a lowered thread offers its CPU once as it
// runs again after sleeping (yieldWoken), on both wakes: a task parked at a
// Checkpoint given its slot back, and an idle hand-off thread given a task.
func TestLoweredThreadsYieldOnWake(t *testing.T) {
	needOSPriority(t)
	var yields, unlowered atomic.Int64
	onYield := func() {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil || attr.Policy != unix.SCHED_IDLE {
			unlowered.Add(1)
		}
		yields.Add(1)
	}
	s := handoffScheduler(t, WithWorkers(1), WithSlice(minSlice), withYieldWoken(onYield))
	ctx := context.Background()

	// Two tasks that take turns on the one slot: each resume follows a park.
	runConcurrently(t, s, 2, checkpointFor(20*time.Millisecond))
	parks := s.Stats().Preempted
	if parks == 0 {
		t.Fatal("the two tasks never took turns at a Checkpoint")
	}
	if got := uint64(yields.Load()); got < parks {
		t.Errorf("%d yields on waking for %d parked tasks given their slot back", got, parks)
	}

	// A task of more than callerSpin leaves its thread waiting on its
	// channel (not spinning); the next task wakes it.
	long := func(*Task) error {
		for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
		}
		return nil
	}
	for range 3 {
		before := yields.Load()
		if err := s.Run(ctx, long); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * threadSpin)
		if err := s.Run(ctx, long); err != nil {
			t.Fatal(err)
		}
		if yields.Load() == before {
			t.Error("an idle hand-off thread given a task did not yield on waking")
		}
	}
	if n := unlowered.Load(); n > 0 {
		t.Errorf("%d yields on a thread that was not lowered to SCHED_IDLE", n)
	}
}

// checkpointFor is a task that computes for d, with a Checkpoint between
// short steps.
func checkpointFor(d time.Duration) func(*Task) error {
	return func(tk *Task) error {
		for end := time.Now().Add(d); time.Now().Before(end); {
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
}

// runConcurrently runs fn through s on n goroutines at once and waits for
// them all; an error fails the test.
func runConcurrently(t *testing.T, s *Scheduler, n int, fn func(*Task) error) {
	t.Helper()
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(context.Background(), fn); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}
