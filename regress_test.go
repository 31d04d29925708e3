package cpusched

// Regression tests: each is named by the behaviour it pins, and its comment
// says what once broke.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// Broke once: Close hung when a task was inside Blocking as Close gave up,
// because the task came back uncancelled and its Checkpoint never failed.
func TestCloseCancelsTaskReturningFromBlocking(t *testing.T) {
	s, err := New(WithIsolation(IsolationReserve), WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	in, release := make(chan struct{}), make(chan struct{})
	h, _ := s.Go(context.Background(), func(tk *Task) error {
		tk.Blocking(func() { close(in); <-release })
		for {
			if err := tk.Checkpoint(); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	})
	<-in
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- s.Close(ctx) }()
	time.Sleep(100 * time.Millisecond)
	close(release)
	select {
	case err := <-closed:
		if err != context.DeadlineExceeded {
			t.Errorf("Close = %v, want context.DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return: the task back from Blocking was not cancelled")
	}
	if err := h.Wait(); err != ErrClosed {
		t.Errorf("Wait = %v, want ErrClosed", err)
	}
}

// Broke once: SetGroupWeight on a group with no active task changed the
// class queue's weight sum, breaking V for good.
func TestSetGroupWeightOnInactiveGroupKeepsWeightSum(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	if err := s.Run(context.Background(), func(*Task) error { return nil }, WithGroup("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.SetGroupWeight("a", 1); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	sum := s.rq.queues[qFair].groups.weightSum
	s.mu.Unlock()
	if sum != 0 {
		t.Errorf("weightSum with no active group = %d, want 0", sum)
	}
}

// Broke once: Checkpoint (or a nested Blocking) inside Blocking's fn
// panicked under the scheduler's lock and froze the scheduler.
func TestCheckpointInsideBlockingReturnsWithoutFreezing(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	done := make(chan error, 1)
	go func() {
		done <- s.Run(context.Background(), func(tk *Task) error {
			tk.preempt.Or(preemptSlice) // as if the monitor had just ended the slice
			var inner error
			tk.Blocking(func() {
				inner = tk.Checkpoint()
				tk.Blocking(func() {}) // nested
			})
			return inner
		})
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run hung: Checkpoint inside Blocking")
	}
	st := s.Stats() // would block forever with the lock held
	if st.Running != 0 || st.Blocked != 0 || st.Completed != 1 {
		t.Errorf("Stats = %+v, want Running 0, Blocked 0, Completed 1", st)
	}
}

// Broke once: a Run whose context ended as it was dispatched ran fn anyway.
func TestRunWithContextEndedAtDispatchNeverStartsFn(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	var startedExpired atomic.Int64
	for range 200 {
		release := make(chan struct{})
		h, _ := s.Go(context.Background(), func(*Task) error { <-release; return nil })
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() {
			res <- s.Run(ctx, func(tk *Task) error {
				if tk.ctx.Err() != nil {
					startedExpired.Add(1)
				}
				return nil
			})
		}()
		waitFor(t, func() bool { return s.Stats().Queued == 1 })
		cancel()
		close(release) // the slot frees just after the context ended
		if err := <-res; err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want nil or context.Canceled", err)
		}
		h.Wait()
	}
	if n := startedExpired.Load(); n > 0 {
		t.Errorf("fn started %d times with its context already ended", n)
	}
	checkIdentity(t, s.Stats())
}
