// Task.Checkpoint and Task.Blocking in IsolationReserve.

package cpusched

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCheckpointYieldsAtSliceEnd(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	var order []string
	var mu sync.Mutex
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }

	aRunning := make(chan struct{})
	bQueued := make(chan struct{})
	ha, _ := s.Go(context.Background(), func(t *Task) error {
		close(aRunning)
		<-bQueued
		// Within the slice: Checkpoint does nothing.
		if err := t.Checkpoint(); err != nil {
			return err
		}
		note("a-before")
		clk.Advance(int64(10 * time.Millisecond))
		t.s.tick()
		if err := t.Checkpoint(); err != nil { // parks; b runs
			return err
		}
		note("a-after")
		return nil
	})
	<-aRunning
	hb, _ := s.Go(context.Background(), func(*Task) error { note("b"); return nil })
	close(bQueued)
	if err := ha.Wait(); err != nil {
		t.Fatal(err)
	}
	hb.Wait()
	got := strings.Join(order, ",")
	if want := "a-before,b,a-after"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	if st := s.Stats(); st.Preempted != 1 {
		t.Errorf("Preempted = %d, want 1", st.Preempted)
	}
}

func TestCheckpointWithoutWaitersContinues(t *testing.T) {
	clk := newFakeClock()
	s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	err := s.Run(context.Background(), func(t *Task) error {
		for range 10 {
			clk.Advance(int64(5 * time.Millisecond))
			t.s.tick()
			if err := t.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Preempted != 0 {
		t.Errorf("Preempted = %d, want 0 (nobody waited)", st.Preempted)
	}
}

func TestCheckpointReturnsContextError(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	ctx, cancel := context.WithCancel(context.Background())
	err := s.Run(ctx, func(t *Task) error {
		if err := t.Checkpoint(); err != nil {
			return errors.New("Checkpoint failed before cancel")
		}
		cancel()
		deadline := time.Now().Add(5 * time.Second)
		for t.Checkpoint() == nil { // the AfterFunc that sets the bit runs in its own goroutine
			if time.Now().After(deadline) {
				return errors.New("Checkpoint still nil 5s after cancel")
			}
			time.Sleep(10 * time.Microsecond)
		}
		if err := t.Checkpoint(); err != context.Canceled {
			return errors.New("Checkpoint after cancel = " + errString(err))
		}
		if t.Context().Err() == nil {
			return errors.New("task context not done")
		}
		return t.Checkpoint()
	})
	if err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	if st := s.Stats(); st.Canceled != 1 {
		t.Errorf("Canceled = %d, want 1", st.Canceled)
	}
}

func TestBlockingFreesSlot(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	inBlocking := make(chan struct{})
	bDone := make(chan struct{})
	ha, _ := s.Go(context.Background(), func(t *Task) error {
		t.Blocking(func() {
			close(inBlocking)
			<-bDone // only possible if b got the slot
		})
		return nil
	})
	<-inBlocking
	if st := s.Stats(); st.Blocked != 1 || st.Running != 0 {
		t.Errorf("during Blocking: Stats = %+v, want Blocked 1, Running 0", st)
	}
	if err := s.Run(context.Background(), func(*Task) error { close(bDone); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := ha.Wait(); err != nil {
		t.Fatal(err)
	}
	checkIdentity(t, s.Stats())
}

func TestBlockingPanicKeepsSlotAccounting(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	err := s.Run(context.Background(), func(t *Task) error {
		t.Blocking(func() { panic("in blocking") })
		return nil
	})
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Fatalf("Run = %v, want a *PanicError", err)
	}
	st := s.Stats()
	if st.Running != 0 || st.Blocked != 0 || st.Panicked != 1 {
		t.Errorf("Stats = %+v, want Running 0, Blocked 0, Panicked 1", st)
	}
}

func TestNilTask(t *testing.T) {
	// A nil *Task, what httpsched.TaskFrom returns outside a scheduled
	// handler, is valid: each method does nothing, or what fn needs.
	var task *Task
	if err := task.Checkpoint(); err != nil {
		t.Errorf("Checkpoint: got %v, want nil", err)
	}
	ran := false
	task.Blocking(func() { ran = true })
	if !ran {
		t.Error("Blocking: got fn not run, want it run")
	}
	if ctx := task.Context(); ctx != context.Background() {
		t.Errorf("Context: got %v, want context.Background()", ctx)
	}
	if d := task.Waited(); d != 0 {
		t.Errorf("Waited: got %v, want 0", d)
	}
	// Blocking's fn panics through, as it does on a task.
	defer func() {
		if r := recover(); r != "fn panics" {
			t.Errorf("Blocking with a panicking fn: got panic %v, want %q", r, "fn panics")
		}
	}()
	task.Blocking(func() { panic("fn panics") })
}
