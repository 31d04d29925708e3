//go:build linux

// IsolationOSPriority's pinned hand-offs (pin.go).

package cpusched

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cpusched/cpusched/internal/osprio"
)

// TestHandOffPinsTheNextThread: tasks that take turns on one slot at
// Checkpoints wake each other's threads pinned to the yielding thread's
// CPU, and every thread has its own mask back before its task goes on.
func TestHandOffPinsTheNextThread(t *testing.T) {
	needOSPriority(t)
	var want unix.CPUSet
	if err := unix.SchedGetaffinity(0, &want); err != nil {
		t.Fatal(err)
	}
	var pinnedWakes, offCPU atomic.Int64
	onWake := func() {
		var m unix.CPUSet
		if unix.SchedGetaffinity(0, &m) != nil || m.Count() != 1 || !m.IsSet(osprio.CPU()) {
			offCPU.Add(1) // woken pinned, but not on the one CPU of its mask
		}
		pinnedWakes.Add(1)
	}
	s := handoffScheduler(t, WithWorkers(1), WithSlice(minSlice), withPinnedWake(onWake))
	var wrongMask atomic.Int64
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(context.Background(), func(tk *Task) error {
				for end := time.Now().Add(40 * time.Millisecond); time.Now().Before(end); {
					if err := tk.Checkpoint(); err != nil {
						return err
					}
					var m unix.CPUSet
					if unix.SchedGetaffinity(0, &m) != nil || m != want {
						wrongMask.Add(1)
					}
				}
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if pinnedWakes.Load() == 0 {
		t.Fatalf("no pinned wake in %d preemptions", s.Stats().Preempted)
	}
	if n := offCPU.Load(); n != 0 {
		t.Errorf("%d of %d pinned wakes were not on the pinned CPU", n, pinnedWakes.Load())
	}
	if n := wrongMask.Load(); n != 0 {
		t.Errorf("a task went on %d times from a Checkpoint on a thread whose mask was not put back", n)
	}
}
