package cpusched

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestSmallKindNotTakenForCallsOfItsGroup: one worker, three clients of a
// call that runs 40 ms without a Checkpoint, all in the default group. A
// small task of another kind, arriving while a call runs, runs as soon as
// that call ends, before the calls that wait (the lane); one of the
// calls' own kind is placed as a call, not in the lane. Before the
// estimate was kept per kind, both were placed as calls (kind.go).
func TestSmallKindNotTakenForCallsOfItsGroup(t *testing.T) {
	for _, tc := range []struct {
		kind     string
		wantLane bool
	}{
		{"lookup", true},
		{"call", false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			clk := newFakeClock()
			s := newTestScheduler(t, WithWorkers(1), withClock(clk), withoutMonitor())
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var mu sync.Mutex
			var order []string
			note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
			calls := func() int { mu.Lock(); defer mu.Unlock(); return len(order) }
			waiting := func() int { s.mu.Lock(); defer s.mu.Unlock(); return s.rq.nwaiting }
			call := func(*Task) error {
				// The other two clients' calls wait (or the test is over),
				// so that others wait all along this one.
				for waiting() < 2 && ctx.Err() == nil {
					runtime.Gosched()
				}
				clk.Advance(int64(40 * time.Millisecond)) // no Checkpoint: a call that cannot yield
				note("C")
				return nil
			}
			var wg sync.WaitGroup
			for range 3 {
				wg.Go(func() {
					for ctx.Err() == nil {
						s.Run(ctx, call, WithKind("call"))
					}
				})
			}
			waitFor(t, func() bool { return calls() >= 8 }) // over the estimate's window
			if got := lockedKindOverrun(s, "", "call"); got < 20*time.Millisecond {
				t.Fatalf("the calls' overrun estimate is %v, want about 39 ms", got)
			}
			mu.Lock() // the small task arrives while a call holds the slot
			arrival := len(order)
			h, err := s.Go(context.Background(), func(*Task) error { note("S"); return nil }, WithKind(tc.kind))
			s.mu.Lock()
			inLane := slices.ContainsFunc(s.rq.waiting(), func(w *Task) bool { return w.inLane })
			s.mu.Unlock()
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantLane && inLane {
				t.Errorf("a task of the calls' kind waits in the small-task lane")
			}
			h.Wait()
			cancel()
			wg.Wait()
			mu.Lock()
			defer mu.Unlock()
			got := order[arrival:]
			// At most the call holding the slot as it arrived ends first
			// (its "C" comes after S's arrival), not the two that waited.
			if i := slices.Index(got, "S"); tc.wantLane && (i < 0 || i > 1) {
				t.Errorf("after the small task arrived: %v, want at most one call before it", got[:min(len(got), 6)])
			}
		})
	}
}

// kindOverrunOf returns the overrun estimate of the named group for a
// kind (WithKind's name), the largest of its classes'.
func (q *runQueue) kindOverrunOf(group, kind string) time.Duration {
	slot := kindSlotOfName(kind)
	var over int64
	for i := range q.queues {
		if g := q.queues[i].byName[group]; g != nil {
			if k := g.kindOverrun(slot); k != nil {
				over = max(over, k.overrun)
			}
		}
	}
	return time.Duration(over)
}

// lockedKindOverrun is s's kindOverrunOf, under s.mu.
func lockedKindOverrun(s *Scheduler, group, kind string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rq.kindOverrunOf(group, kind)
}

// TestGroupKindsReplaceLeastRecent: a group keeps groupKinds kinds'
// estimates; a new kind past that takes the place of the one charged
// least recently, and starts from none; the others keep theirs.
func TestGroupKindsReplaceLeastRecent(t *testing.T) {
	var g groupNode
	var slots []uint8
	for i := 0; len(slots) < groupKinds+1; i++ {
		slot := uint8(i % kindSlots)
		slots = append(slots, slot)
		g.noteKindOverrun(slot, int64(len(slots)), overrunWindow, int64(len(slots))) // the estimate is this one
	}
	if k := g.kindOverrun(slots[0]); k != nil {
		t.Errorf("the least recently charged kind is still kept (overrun %d)", k.overrun)
	}
	for i, slot := range slots[1:] {
		k := g.kindOverrun(slot)
		if k == nil || k.overrun != int64(i+2) {
			t.Errorf("kind %d: %+v, want its estimate %d kept", slot, k, i+2)
		}
	}
	// Half the window's weight: from 0, half of what was noted.
	if g.noteKindOverrun(slots[0], 40, overrunWindow/2, 100); g.kindOverrun(slots[0]).overrun != 20 {
		t.Errorf("a kind back after it was replaced starts at %d, want 0", g.kindOverrun(slots[0]).overrun*2-40)
	}
	var largest int64
	for _, k := range g.kinds {
		largest = max(largest, k.overrun)
	}
	if g.kindsMax != largest {
		t.Errorf("kindsMax %d, want the largest kept, %d", g.kindsMax, largest)
	}
	if k := g.kindOverrun(slots[1]); k != nil {
		t.Errorf("kind %d, now the least recent, is still kept", slots[1])
	}
}

// closure returns a closure of one function literal, its own n inside.
// Not inlined: an inlined copy would be a literal of its own, with code
// of its own, and so a kind of its own, at each call site.
//
//go:noinline
func closure(n int) func(*Task) error {
	return func(*Task) error { return fmt.Errorf("%d", n) }
}

// TestKindOf: WithKind's name sets the kind, the last one wins, and
// without one the tasks of one function literal share a kind, whatever
// their closures hold, as reflect reads the code pointer.
func TestKindOf(t *testing.T) {
	tc, err := applyTaskOptions([]TaskOption{WithKind("a"), WithKind("b")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := kindOf(tc, closure(1)), kindSlotOfName("b"); got != want {
		t.Errorf("WithKind(a), WithKind(b): slot %d, want b's %d", got, want)
	}
	none, _ := applyTaskOptions(nil)
	one, two := closure(1), closure(2)
	if a, b := kindOf(none, one), kindOf(none, two); a != b {
		t.Errorf("two closures of one literal: kinds %d and %d, want one", a, b)
	}
	if got, want := codePointer(one), reflect.ValueOf(one).Pointer(); got != want {
		t.Errorf("codePointer = %#x, reflect's Pointer %#x", got, want)
	}
	for _, name := range []string{"", "GET /login", string(make([]byte, 1000))} {
		if slot := kindSlotOfName(name); slot >= kindSlots {
			t.Errorf("kindSlotOfName(%.10q) = %d, want < %d", name, slot, kindSlots)
		}
	}
}

// TestLaneDemotesKindThatOverruns: a new task that joined the lane while
// its kind had no estimate leaves the lane for the heaps, with a request
// as long as its kind's overrun, once the estimate says its kind runs past
// its slices; a task of another kind stays in the lane and runs next.
func TestLaneDemotesKindThatOverruns(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1), withClock(newFakeClock()), withoutMonitor())
	mk := func(kind string) *Task {
		task, _, err := s.newTask(context.Background(), emptyTask, []TaskOption{WithKind(kind)}, true)
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	call, lookup := mk("call"), mk("lookup")
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, task := range []*Task{call, lookup} {
		s.rq.activate(task, true)
		s.rq.add(task)
	}
	if !call.inLane || !lookup.inLane {
		t.Fatalf("with no estimate, in the lane: call %v, lookup %v; want both", call.inLane, lookup.inLane)
	}
	const overrun = 39 * time.Millisecond
	call.group.noteKindOverrun(call.ent.kind, int64(overrun), overrunWindow, 0)
	if got := s.rq.lanePeek(0); got != lookup {
		t.Errorf("lanePeek = %p, want the lookup %p (the call demoted)", got, lookup)
	}
	if call.inLane || call.ent.heapIdx < 0 {
		t.Errorf("call: inLane %v, heapIdx %d; want in the heaps", call.inLane, call.ent.heapIdx)
	}
	if req := time.Duration((call.ent.deadline - call.ent.vruntime) * call.ent.weight / nice0Weight); req != DefaultSlice+overrun {
		t.Errorf("the demoted call's request %v, want %v", req, DefaultSlice+overrun)
	}
	for _, task := range []*Task{lookup, call} {
		s.rq.remove(task)
		s.rq.deactivate(task, true)
	}
}
