//go:build linux

// IsolationOSPriority's hand-off threads (handoff.go): the hand-off of a
// task to one, its spin and park, and the lane's CPU clock on them.

package cpusched

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
	waitFor(t, func() bool { return sleepingIdleThreads(s) })
}

// sleepingIdleThreads reports whether s has an idle hand-off thread and
// none of them spins (handoffThread.await): the next task given to one
// wakes a sleeping thread.
func sleepingIdleThreads(s *Scheduler) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.os.idleThreads {
		if w.state.Load() != threadWaiting {
			return false
		}
	}
	return len(s.os.idleThreads) > 0
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
