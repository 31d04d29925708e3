package cpusched

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// promptly bounds how long Close may take to return once its ctx has
// ended. Close itself does no waiting then; the bound is generous for a
// loaded 2-core machine under -race, and the test logs what it saw.
const promptly = 2 * time.Second

// TestCloseHonoursDeadlineWithStuckTasks checks, in every mode, that Close
// returns its ctx's error promptly when tasks never reach a Checkpoint
// (one stuck running, one stuck inside Blocking), that the other tasks
// (parked at a Checkpoint, running) end at once with ErrClosed
// instead of waiting behind the stuck ones, that a second and a concurrent
// Close do the same, and that once the stuck tasks return, Stats counts
// them and a last Close releases everything (leakcheck checks the monitor and
// the workers in TestMain). TestCloseCancelsAfterDeadline covers queued
// tasks.
func TestCloseHonoursDeadlineWithStuckTasks(t *testing.T) {
	for _, mode := range testModes() {
		t.Run(mode.name, func(t *testing.T) {
			s, err := New(append(mode.opts, WithWorkers(2), WithSlice(minSlice))...)
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			stuckIn := make(chan struct{}, 2)
			// One task stuck on its slot: it never checks in.
			stuck, _ := s.Go(context.Background(), func(*Task) error {
				stuckIn <- struct{}{}
				<-release
				return nil
			})
			// One task stuck inside Blocking; when fn returns, its
			// Checkpoint must fail.
			blocked, _ := s.Go(context.Background(), func(tk *Task) error {
				tk.Blocking(func() { stuckIn <- struct{}{}; <-release })
				return tk.Checkpoint()
			})
			<-stuckIn
			<-stuckIn
			// Two tasks share the other slot at Checkpoints: at any moment
			// one holds it and the other is parked.
			spin := func(tk *Task) error {
				for {
					if err := tk.Checkpoint(); err != nil {
						return err
					}
					time.Sleep(20 * time.Microsecond)
				}
			}
			var wg sync.WaitGroup
			spinErrs := make([]error, 2)
			for i := range 2 {
				wg.Add(1)
				go func() { defer wg.Done(); spinErrs[i] = s.Run(context.Background(), spin) }()
			}
			waitFor(t, func() bool { return s.Stats().Preempted > 2 })

			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			var closeErrs [2]error
			var took [2]time.Duration
			var cwg sync.WaitGroup
			for i := range 2 { // two concurrent Closes with the same deadline
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					start := time.Now()
					closeErrs[i] = s.Close(ctx)
					took[i] = time.Since(start)
				}()
			}
			cwg.Wait()
			for i, err := range closeErrs {
				if err != context.DeadlineExceeded {
					t.Errorf("Close %d = %v, want context.DeadlineExceeded", i, err)
				}
				if took[i] > 20*time.Millisecond+promptly {
					t.Errorf("Close %d took %v with a 20ms deadline", i, took[i])
				}
			}
			t.Logf("Close with a 20ms deadline returned after %v and %v", took[0], took[1])

			// The cooperative tasks end although the stuck ones still
			// hold a slot and the Blocking call.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(promptly):
				t.Fatal("tasks parked at a Checkpoint did not end after Close gave up")
			}
			for i, err := range spinErrs {
				if err != ErrClosed {
					t.Errorf("spinning Run %d = %v, want ErrClosed", i, err)
				}
			}
			st := s.Stats()
			if st.Started != 2 || st.Blocked != 1 {
				t.Errorf("after Close gave up: Running %d, Blocked %d; want the 2 stuck tasks, 1 in Blocking", st.Started, st.Blocked)
			}
			checkIdentity(t, st)

			// A third Close with an expired ctx returns at once too.
			expired, cancelExpired := context.WithCancel(context.Background())
			cancelExpired()
			if err := s.Close(expired); err != context.Canceled {
				t.Errorf("Close with an expired ctx = %v, want context.Canceled", err)
			}

			close(release)
			if err := stuck.Wait(); err != nil {
				t.Errorf("stuck task = %v, want nil (it ignored the cancellation)", err)
			}
			if err := blocked.Wait(); err != ErrClosed {
				t.Errorf("task back from Blocking: Checkpoint = %v, want ErrClosed", err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Errorf("last Close = %v, want nil once the stragglers ended", err)
			}
			st = s.Stats()
			if st.Started != 0 || st.Queued != 0 || st.Running != 0 || st.Blocked != 0 {
				t.Errorf("after the stragglers: %+v, want nothing left", st)
			}
			if st.Completed != 1 || st.Canceled != 3 {
				t.Errorf("Completed %d, Canceled %d; want 1 (the stuck task) and 3", st.Completed, st.Canceled)
			}
			checkIdentity(t, st)
		})
	}
}

// TestCloseWithoutTasksPrefersNil checks that Close returns nil, not its
// ctx's error, when nothing was running even if ctx has already ended.
func TestCloseWithoutTasksPrefersNil(t *testing.T) {
	for _, mode := range IsolationModes() {
		s, err := New(WithIsolation(mode))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		for range 20 { // the old select chose at random
			if err := s.Close(ctx); err != nil {
				t.Fatalf("%v: Close(expired ctx) with no task = %v, want nil", mode, err)
			}
		}
	}
}

func TestCloseDrainsThenRejects(t *testing.T) {
	s, err := New(WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	var handles []*Handle
	for range 5 {
		h, err := s.Go(context.Background(), func(*Task) error { time.Sleep(time.Millisecond); ran.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			t.Errorf("Wait after Close = %v, want nil", err)
		}
	}
	if ran.Load() != 5 {
		t.Errorf("Close returned with %d of 5 tasks run", ran.Load())
	}
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != ErrClosed {
		t.Errorf("Run after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Go(context.Background(), func(*Task) error { return nil }); err != ErrClosed {
		t.Errorf("Go after Close = %v, want ErrClosed", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	st := s.Stats()
	if st.Rejected != 2 || st.Completed != 5 {
		t.Errorf("Stats = %+v, want Rejected 2, Completed 5", st)
	}
	checkIdentity(t, st)
}

func TestCloseCancelsAfterDeadline(t *testing.T) {
	s, err := New(WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	// A long task that never checks in but watches its context.
	hRun, _ := s.Go(context.Background(), func(t *Task) error {
		close(running)
		select {
		case <-t.Context().Done():
			return context.Cause(t.Context())
		case <-time.After(time.Minute):
			return nil
		}
	})
	<-running
	queuedRan := false
	hQueued, _ := s.Go(context.Background(), func(*Task) error { queuedRan = true; return nil })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := s.Close(ctx); err != context.DeadlineExceeded {
		t.Errorf("Close = %v, want context.DeadlineExceeded", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Close took %v", d)
	}
	if err := hRun.Wait(); err != ErrClosed {
		t.Errorf("running task's Wait = %v, want ErrClosed", err)
	}
	if err := hQueued.Wait(); err != ErrClosed {
		t.Errorf("queued task's Wait = %v, want ErrClosed", err)
	}
	if queuedRan {
		t.Error("a queued task ran after Close gave up")
	}
	st := s.Stats()
	if st.Canceled != 2 {
		t.Errorf("Canceled = %d, want 2", st.Canceled)
	}
	checkIdentity(t, st)
}

func TestCloseStopsCheckpointingTask(t *testing.T) {
	s, err := New(WithWorkers(1))
	if err != nil {
		t.Fatal(err)
	}
	running := make(chan struct{})
	h, _ := s.Go(context.Background(), func(t *Task) error {
		close(running)
		for {
			if err := t.Checkpoint(); err != nil {
				if t.Context().Err() == nil {
					return errors.New("Checkpoint failed but the task context is not done")
				}
				return err
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	<-running
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := s.Close(ctx); err != context.DeadlineExceeded {
		t.Errorf("Close = %v, want context.DeadlineExceeded", err)
	}
	if err := h.Wait(); err != ErrClosed {
		t.Errorf("Wait = %v, want ErrClosed", err)
	}
}

func TestCloseCancelsContextBeforeCheckpointFails(t *testing.T) {
	// A task whose Checkpoint returns ErrClosed finds its Context done,
	// with cause ErrClosed, at once, even when it asked for the context
	// before Close (the adapters do, and tell a cut task by the cause):
	// running, and back from a Blocking call that Close gave up during.
	// The context's AfterFunc on Close alone cancels it a few
	// microseconds later, which a spinning task outruns.
	for _, blocking := range []bool{false, true} {
		for round := range 20 {
			s := newTestScheduler(t, WithWorkers(1))
			running, release := make(chan struct{}), make(chan struct{})
			h, err := s.Go(context.Background(), func(task *Task) error {
				ctx := task.Context()
				close(running)
				if blocking {
					task.Blocking(func() { <-release })
				}
				for task.Checkpoint() == nil {
				}
				if cause := context.Cause(ctx); cause != ErrClosed {
					return fmt.Errorf("Checkpoint failed with the context's cause %v, want ErrClosed", cause)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			<-running
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := s.Close(ctx); err != context.Canceled {
				t.Errorf("Close = %v, want context.Canceled", err)
			}
			close(release)
			if err := h.Wait(); err != nil {
				t.Fatalf("blocking %t, round %d: %v", blocking, round, err)
			}
		}
	}
}
