// Package schedtest holds the test helpers that the packages built on
// cpusched share: a scheduler closed at the end of the test, and a task that
// holds one of its slots. (The root package's own tests keep theirs: they
// cannot import a package that imports cpusched.)
package schedtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// NewScheduler returns a scheduler with one slot in IsolationNone (opts
// come after these defaults and can change them), closed at the end of the
// test, which fails if Close does.
func NewScheduler(t testing.TB, opts ...cpusched.Option) *cpusched.Scheduler {
	t.Helper()
	opts = append([]cpusched.Option{cpusched.WithIsolation(cpusched.IsolationNone), cpusched.WithWorkers(1)}, opts...)
	s, err := cpusched.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// HoldSlot runs a task that holds one of s's slots until release is called,
// and returns once the task is running. release waits for the task to end;
// it may be called more than once and is also called at the end of the test.
func HoldSlot(t testing.TB, s *cpusched.Scheduler) (release func()) {
	t.Helper()
	started, done := make(chan struct{}), make(chan struct{})
	h, err := s.Go(context.Background(), func(*cpusched.Task) error {
		close(started)
		<-done
		return nil
	})
	if err != nil {
		t.Fatalf("Go: %v", err)
	}
	<-started
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(done)
			h.Wait()
		})
	}
	t.Cleanup(release)
	return release
}

// WaitQueued waits until n tasks are queued in s (Stats().Queued), and
// fails the test if that takes 10s.
func WaitQueued(t testing.TB, s *cpusched.Scheduler, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Queued != n; {
		if time.Now().After(deadline) {
			t.Fatalf("got %d tasks queued after 10s, want %d", s.Stats().Queued, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// Compute runs a task of s with opts that computes for d, with a
// Checkpoint per pass, and fails the test if Run returns an error.
func Compute(t testing.TB, s *cpusched.Scheduler, d time.Duration, opts ...cpusched.TaskOption) {
	t.Helper()
	err := s.Run(context.Background(), func(task *cpusched.Task) error {
		for start := time.Now(); time.Since(start) < d; {
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}, opts...)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
}
