//go:build linux

// IsolationOSPriority's hold (hold.go): a short Blocking call keeps its
// task's slot, and the hold timer gives it up.

package cpusched

import (
	"context"
	"fmt"
	"testing"
	"time"
)

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
			tk.os.blockAvg = int64(avg) // as if its earlier calls took avg
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

// TestFirstBlockingCallFollowsTheOthers: where IsolationOSPriority hands
// tasks to hand-off threads, a task's first Blocking call keeps the slot
// when the scheduler's recent calls were short, and gives it up when they
// were long. The calls take their lengths on a fake clock: on the real one,
// beside busy processes, a call that returns at once took longer than
// blockHold on its SCHED_IDLE thread, and counted as long.
func TestFirstBlockingCallFollowsTheOthers(t *testing.T) {
	clk := newFakeClock()
	s := handoffScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
	firstKept := func(d time.Duration) bool {
		for range 8 { // calls of d by other tasks
			if err := s.Run(context.Background(), func(tk *Task) error {
				tk.Blocking(func() { clk.Advance(int64(d)) })
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
