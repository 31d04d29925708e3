//go:build linux

// IsolationOSPriority with tasks on their own goroutines: lowering their threads, and dispatch by task length.

package cpusched

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
	"golang.org/x/sys/unix"
)

// TestKeptBlockingDoesNotLower: the monitor lowers a task's thread after
// osLowerAfter of its slot time, but time in Blocking calls that kept the
// slot is waiting, not computing, and does not count: a task that makes
// many short Blocking calls (a handler writing a response in chunks)
// stays at normal priority, and one that computes as long is lowered.
func TestKeptBlockingDoesNotLower(t *testing.T) {
	s := ownScheduler(t, WithWorkers(1))
	ctx := context.Background()
	var waiter, computer bool
	err := s.Run(ctx, func(tk *Task) error {
		wait := func() { // a short wait for another goroutine, as a socket write's
			done := make(chan struct{})
			go close(done)
			<-done
		}
		for end := time.Now().Add(4 * osLowerAfter); time.Now().Before(end); {
			tk.Blocking(wait)
		}
		// Give the monitor time to look (its timers are 1 ms-coarse on an
		// idle machine), in one more kept call.
		tk.Blocking(func() { time.Sleep(2 * time.Millisecond) })
		waiter = tk.os.lowered.Load()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx, func(tk *Task) error {
		computer = spinUntil(tk.os.lowered.Load)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if waiter || !computer {
		t.Errorf("lowered: %v after %v in kept Blocking calls, %v after computing; want false, true", waiter, 4*osLowerAfter, computer)
	}
}

// TestNestedRunKeepsTheOuterThreadLowered: a Run nested in a task whose
// thread the monitor has lowered runs on that thread, finds it lowered
// already, and leaves it so when it returns; the outer task's end puts it
// back. A caller locked to its thread before Run stays locked to it.
func TestNestedRunKeepsTheOuterThreadLowered(t *testing.T) {
	s := ownScheduler(t, WithWorkers(2))
	ctx := context.Background()
	runtime.LockOSThread() // the caller's own lock, which Run must keep
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	var inner, afterInner int
	err := s.Run(ctx, func(outer *Task) error {
		if !spinUntil(outer.os.lowered.Load) {
			return fmt.Errorf("the outer task was not lowered in 5 s")
		}
		if err := s.Run(ctx, func(in *Task) error {
			for end := time.Now().Add(3 * osLowerAfter); time.Now().Before(end); {
			}
			inner = threadPolicy(t)
			return nil
		}); err != nil {
			return err
		}
		afterInner = threadPolicy(t)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	idle := unix.SCHED_IDLE
	if inner != idle || afterInner != idle {
		t.Errorf("thread policy: %d in the nested task, %d after it returned; want %d, %d", inner, afterInner, idle, idle)
	}
	if got := threadPolicy(t); got != 0 {
		t.Errorf("thread policy after the outer task = %d, want 0", got)
	}
	if got := unix.Gettid(); got != tid {
		t.Errorf("the caller's goroutine moved from thread %d to %d: Run undid its LockOSThread", tid, got)
	}
}

// TestDispatchFollowsTaskLength: with tasks on their own goroutines, a
// function whose tasks turn out long is handed off to hand-off threads from
// its fourth task on, and goes back to its own goroutines after two short
// ones have brought its score down; another function's short tasks stay on
// their own goroutines throughout.
func TestDispatchFollowsTaskLength(t *testing.T) {
	// The table counts a hand-off thread's CPU time, which a mark assist
	// of the collector adds to: under -race one in a short task (its
	// appends) can pass osLowerAfter and count it long. The premise here
	// is the table's arithmetic, so no collection runs meanwhile.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	s := ownScheduler(t, WithWorkers(1))
	ctx := context.Background()
	long := true
	var handedOff []bool
	work := func(tk *Task) error {
		handedOff = append(handedOff, tk.os.handoff)
		switch {
		case long && !tk.os.handoff:
			// Long on its own goroutine: until the monitor lowers it.
			if !spinUntil(tk.os.lowered.Load) {
				return errors.New("a task computing for 5 s was not lowered")
			}
		case long:
			// Handed off: 500 us of CPU time, not wall time (a worker's
			// SCHED_IDLE thread on a busy machine computes less than the
			// wall clock shows, and the table counts its CPU time).
			for c0 := osprio.ThreadCPU(); osprio.ThreadCPU()-c0 < int64(2*osLowerAfter); {
			}
		}
		return nil
	}
	otherOff := false
	other := func(tk *Task) error {
		otherOff = otherOff || tk.os.handoff
		return nil
	}
	if kindSlotOf(reflect.ValueOf(work).Pointer()) == kindSlotOf(reflect.ValueOf(other).Pointer()) {
		t.Skip("the two functions share a slot of the length table in this build")
	}
	for i := range 9 {
		long = i < 5
		if err := s.Run(ctx, work); err != nil {
			t.Fatal(err)
		}
		if err := s.Run(ctx, other); err != nil {
			t.Fatal(err)
		}
	}
	// Scores after each task: 256, 448, 592, 700, 781 (long), then 586,
	// 439, 329, 247 (short); handed off from 512.
	want := []bool{false, false, false, true, true, true, true, false, false}
	if !slices.Equal(handedOff, want) || otherOff {
		t.Errorf("handed off: %v, want %v; the short function's tasks handed off: %v, want false", handedOff, want, otherOff)
	}
}

// TestCheckpointLowersByThreadCPU: a task on its own goroutine lowers its
// own thread at a Checkpoint once the thread's CPU clock shows it has
// computed osLowerAfter, without the monitor (whose timer is late while
// the P that set it runs the task), and slot time in which its thread did
// not run does not count, even when the task is first seen after it.
func TestCheckpointLowersByThreadCPU(t *testing.T) {
	s := ownScheduler(t, WithWorkers(1), withoutMonitorLowering())
	ctx := context.Background()
	var sleeper, computer bool
	err := s.Run(ctx, func(tk *Task) error {
		// The thread sleeps: slot time passes, its CPU clock does not.
		time.Sleep(4 * osLowerAfter)
		for range 4 * lowerCheckEvery {
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		sleeper = tk.os.lowered.Load()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx, func(tk *Task) error {
		computer = spinUntil(func() bool {
			tk.Checkpoint()
			return tk.os.lowered.Load()
		})
		if computer && threadPolicy(t) != unix.SCHED_IDLE {
			return fmt.Errorf("lowered, but the thread's policy is %d", threadPolicy(t))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if sleeper || !computer {
		t.Errorf("lowered: %v after sleeping %v, %v after computing; want false, true", sleeper, 4*osLowerAfter, computer)
	}
}

// TestCountdownBitFollowsTheCountdown: Checkpoint's fast path loads one
// word, so preempt's bit preemptCountdown must be set exactly while the
// countdown (lowerCheck) runs, through the first check, the paced ones
// and the lowering, which ends it; else a Checkpoint skips the countdown
// and the thread is never lowered, or takes the slow path for nothing.
func TestCountdownBitFollowsTheCountdown(t *testing.T) {
	s := ownScheduler(t, WithWorkers(1), withoutMonitorLowering())
	var bad string
	var lowered bool
	err := s.Run(context.Background(), func(tk *Task) error {
		check := func(where string) {
			if bit := tk.preempt.Load()&preemptCountdown != 0; bit != (tk.lowerCheck != 0) && bad == "" {
				bad = fmt.Sprintf("%s: countdown %d, bit %v", where, tk.lowerCheck, bit)
			}
		}
		check("as fn begins")
		lowered = spinUntil(func() bool {
			tk.Checkpoint()
			check("after a Checkpoint")
			return tk.os.lowered.Load()
		})
		for range 4 * lowerCheckEvery {
			tk.Checkpoint()
			check("lowered")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if bad != "" || !lowered {
		t.Errorf("lowered %v (want true); bit out of step: %q", lowered, bad)
	}
}

// TestOuterFoundLoweredLeavesTheThreadAlone: when a Run nested in a task
// lowers the shared thread first and the outer task then finds it lowered
// already, the inner task's end puts the thread back, and the outer's end
// must not lower it again: the caller's thread is back at its setting
// after Run.
func TestOuterFoundLoweredLeavesTheThreadAlone(t *testing.T) {
	s := ownScheduler(t, WithWorkers(2), withoutMonitorLowering())
	ctx := context.Background()
	runtime.LockOSThread() // so that the thread Run used is this one after
	defer runtime.UnlockOSThread()
	before := threadPolicy(t)
	var innerLowered, outerLowered bool
	err := s.Run(ctx, func(outer *Task) error {
		outer.Checkpoint() // the outer task's mark on this thread
		if err := s.Run(ctx, func(in *Task) error {
			innerLowered = spinUntil(func() bool {
				in.Checkpoint()
				return in.os.lowered.Load()
			})
			// The outer task computed all that on this thread too: its
			// own check finds the thread lowered already.
			outerLowered = spinUntil(func() bool {
				outer.Checkpoint()
				return outer.os.lowered.Load()
			})
			return nil
		}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !innerLowered || !outerLowered {
		t.Fatalf("inner lowered %v, outer lowered %v; want both", innerLowered, outerLowered)
	}
	if after := threadPolicy(t); after != before {
		t.Errorf("thread policy %d after Run, want %d as before it", after, before)
	}
}

// TestParkedThreadIsNotLowered: a task on its own goroutine that parks at
// a Checkpoint with its thread unlowered waits unlocked from it. If it is
// given its slot back before its goroutine unlocks, a monitor pass that
// lowered its thread then could do so after the goroutine saw the thread
// unlowered and before it unlocked: the goroutine would leave a lowered
// thread to the runtime's pool, to run other goroutines at SCHED_IDLE
// (parkedLocked). The pass here comes at the widest point of that window:
// the task parked, given its slot back, its goroutine still on its thread.
func TestParkedThreadIsNotLowered(t *testing.T) {
	var s *Scheduler
	var parked atomic.Bool
	var tid int32
	var backRunning, passLowered bool
	s = ownScheduler(t, WithWorkers(1), WithSlice(minSlice), withoutMonitorLowering(),
		withPark(func(tk *Task) {
			if parked.Swap(true) {
				return
			}
			tid = int32(osprio.ThreadID())
			// The queued task runs on the slot and ends, giving it back.
			for end := time.Now().Add(5 * time.Second); !backRunning && time.Now().Before(end); {
				time.Sleep(100 * time.Microsecond)
				s.mu.Lock()
				backRunning = tk.state == stateRunning
				s.mu.Unlock()
			}
			// The monitor's pass (lowerLongLocked, whose lowering the
			// option turns off), before and after computing past
			// osLowerAfter on the thread: the first marks it.
			pass := func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				for _, r := range s.running {
					if !r.os.lowered.Load() && !r.os.handoff {
						s.lowerIfLongLocked(r, s.clock.Now())
					}
				}
			}
			pass()
			spinFor(4 * osLowerAfter)
			pass()
			passLowered = tk.os.lowered.Load()
		}))
	ctx := context.Background()
	err := s.Run(ctx, func(tk *Task) error {
		tk.setLowerCheck(0) // no lowering at its Checkpoints either
		if _, err := s.Go(ctx, func(*Task) error { return nil }); err != nil {
			return err
		}
		for end := time.Now().Add(5 * time.Second); !parked.Load() && time.Now().Before(end); {
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !parked.Load() || !backRunning {
		t.Fatalf("the task parked %v, was given its slot back before it waited %v: the case went untested", parked.Load(), backRunning)
	}
	if passLowered {
		t.Errorf("a monitor pass lowered thread %d, which the task's goroutine was about to leave unlocked", tid)
	}
	if attr, err := unix.SchedGetAttr(int(tid), 0); err == nil && int(attr.Policy) == unix.SCHED_IDLE {
		t.Errorf("thread %d, which the task parked on, is left SCHED_IDLE", tid)
	}
}

// spinFor computes for d of the calling thread's CPU time, or 5 s.
func spinFor(d time.Duration) {
	start := osprio.ThreadCPU()
	for end := time.Now().Add(5 * time.Second); osprio.ThreadCPU()-start < int64(d) && time.Now().Before(end); {
	}
}
