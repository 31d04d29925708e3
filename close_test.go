package cpusched

import (
	"context"
	"sync"
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
