package cpusched

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// windowOf feeds l one window of samples in which the rest of the program
// keeps busy busy Ps (and waiting goroutines) of the ps the tasks leave it,
// and returns l's decision for slots running slots, lent lent.
func windowOf(l *lender, busy, ps float64, slots, lent int) int {
	l.n, l.busy, l.ps = lendWindow, busy*lendWindow, ps*lendWindow
	return l.decide(slots, lent)
}

func TestLenderDecide(t *testing.T) {
	var l lender
	// Two workers on three Ps: the rest has one.
	if got := windowOf(&l, 0.3, 1, 2, 0); got != 0 {
		t.Errorf("rest using 0.3 of its 1 P: decision %d, want 0 (keep)", got)
	}
	if got := windowOf(&l, 1.9, 1, 2, 0); got != 0 {
		t.Errorf("rest keeping its 1 P busy and 0.9 goroutines waiting: decision %d, want 0", got)
	}
	if got := windowOf(&l, 2.5, 1, 2, 0); got != +1 {
		t.Errorf("rest keeping its 1 P busy and 1.5 goroutines waiting: decision %d, want +1 (lend)", got)
	}
	// One slot lent: the rest has two Ps; the last slot is never lent.
	if got := windowOf(&l, 4.5, 2, 1, 1); got != 0 {
		t.Errorf("one slot left: decision %d, want 0", got)
	}
	// Using 1.2 of 2 Ps: without the lent slot it would have 1, busy: keep.
	for i := range 3 * returnWindows {
		if got := windowOf(&l, 1.2, 2, 1, 1); got != 0 {
			t.Fatalf("window %d, rest using 1.2 of 2 Ps: decision %d, want 0", i, got)
		}
	}
	// Using 0.4 of 2: with 1 P it would still leave 0.6 idle, so the slot
	// comes back, but only after returnWindows windows in a row.
	for i := range returnWindows - 1 {
		if got := windowOf(&l, 0.4, 2, 1, 1); got != 0 {
			t.Fatalf("quiet window %d: decision %d, want 0 until %d in a row", i+1, got, returnWindows)
		}
	}
	if got := windowOf(&l, 1.9, 2, 1, 1); got != 0 {
		t.Fatalf("a busy window: decision %d, want 0", got)
	}
	for i := range returnWindows - 1 {
		if got := windowOf(&l, 0.4, 2, 1, 1); got != 0 {
			t.Fatalf("quiet window %d after a busy one: decision %d, want 0 (the count starts again)", i+1, got)
		}
	}
	if got := windowOf(&l, 0.4, 2, 1, 1); got != -1 {
		t.Errorf("%d quiet windows in a row: decision %d, want -1 (take the slot back)", returnWindows, got)
	}
	if got := windowOf(&l, 0, 1, 2, 0); got != 0 {
		t.Errorf("nothing lent, rest idle: decision %d, want 0", got)
	}
}

// fakeLoad is a lendSampler whose rest of the program is busy or idle as
// the test says.
type fakeLoad struct {
	busy  atomic.Bool
	calls atomic.Int64
}

func (f *fakeLoad) sample() (running, runnable uint64, ok bool) {
	f.calls.Add(1)
	if f.busy.Load() {
		return uint64(runtime.GOMAXPROCS(0)), 4, true
	}
	return 0, 0, true
}

// needOSPriority skips t where this machine cannot lower a thread.
func needOSPriority(t *testing.T) {
	t.Helper()
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	if err := probeOSPriority(); err != nil {
		t.Skipf("this machine refuses lowering a thread's priority (%v)", err)
	}
}

// within polls cond until it holds or d has passed.
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// newLending returns a two-worker IsolationOSPriority Scheduler whose
// lender samples load, busy to begin with, every 200 us. It has no guard:
// contended, the scheduler lends no slot, and a busy test machine (other
// packages' tests beside) can starve a lowered thread long enough to turn
// it so.
func newLending(t *testing.T) (*Scheduler, *fakeLoad) {
	t.Helper()
	needOSPriority(t)
	load := &fakeLoad{}
	load.busy.Store(true)
	s, err := New(WithIsolation(IsolationOSPriority), WithWorkers(2), withLendSample(200*time.Microsecond, load.sample), withoutGuard())
	if err != nil {
		t.Fatal(err)
	}
	return s, load
}

func TestOSPriorityLendsSlots(t *testing.T) {
	s, load := newLending(t)
	defer s.Close(context.Background())

	// Two tasks that compute through Checkpoints until told to stop.
	var stop atomic.Bool
	defer stop.Store(true) // before Close, on a failure
	var passes [2]atomic.Int64
	var wg sync.WaitGroup
	for i := range passes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(context.Background(), func(task *Task) error {
				for !stop.Load() {
					passes[i].Add(1)
					spin(20 * time.Microsecond)
					if err := task.Checkpoint(); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				t.Errorf("task %d: %v", i, err)
			}
		}()
	}
	// The rest of the program keeps every P busy: one slot is lent, and
	// one task runs at a time.
	if !within(10*time.Second, func() bool { st := s.Stats(); return st.Lent == 1 && st.Running == 1 }) {
		st := s.Stats()
		t.Fatalf("rest busy: Lent %d Running %d after 10 s (%d samples), want 1 and 1", st.Lent, st.Running, load.calls.Load())
	}
	if st := s.Stats(); st.Lends < 1 || st.Workers != 2 {
		t.Errorf("Lends %d Workers %d, want >= 1 and 2", st.Lends, st.Workers)
	}
	// LentTime grows by the time a slot stays lent.
	lentBefore, at := s.Stats().LentTime, time.Now()
	time.Sleep(20 * time.Millisecond)
	if st := s.Stats(); st.Lent == 1 {
		if grew, slept := st.LentTime-lentBefore, time.Since(at); grew < 10*time.Millisecond || grew > slept+time.Millisecond {
			t.Errorf("LentTime grew by %v over %v with one slot lent", grew, slept)
		}
	}
	// Both still make progress, taking turns on the one slot.
	before := [2]int64{passes[0].Load(), passes[1].Load()}
	if !within(10*time.Second, func() bool { return passes[0].Load() > before[0] && passes[1].Load() > before[1] }) {
		t.Errorf("with a slot lent, a task made no progress in 10 s: passes %d -> %d and %d -> %d", before[0], passes[0].Load(), before[1], passes[1].Load())
	}
	// The rest of the program goes quiet: the slot comes back.
	load.busy.Store(false)
	if !within(10*time.Second, func() bool { st := s.Stats(); return st.Lent == 0 && st.Running == 2 }) {
		st := s.Stats()
		t.Fatalf("rest quiet: Lent %d Running %d after 10 s, want 0 and 2", st.Lent, st.Running)
	}
	lentBefore = s.Stats().LentTime
	time.Sleep(5 * time.Millisecond)
	if st := s.Stats(); st.Lent == 0 && st.LentTime != lentBefore {
		t.Errorf("LentTime went from %v to %v with nothing lent", lentBefore, st.LentTime)
	}
	stop.Store(true)
	wg.Wait()
	if st := s.Stats(); st.Completed != 2 || st.Running != 0 || st.Queued != 0 {
		t.Errorf("after the tasks: Completed %d Running %d Queued %d, want 2, 0, 0", st.Completed, st.Running, st.Queued)
	}
}

// A task that makes no Checkpoint keeps its slot; a lent slot only stops
// the next task from starting.
func TestOSPriorityLendingWithoutCheckpoints(t *testing.T) {
	s, _ := newLending(t)
	defer s.Close(context.Background())
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) }) // before Close, on a failure
	var running atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(context.Background(), func(*Task) error {
				running.Add(1)
				<-release
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	if !within(10*time.Second, func() bool { return s.Stats().Lent == 1 }) {
		t.Fatalf("Lent %d after 10 s, want 1", s.Stats().Lent)
	}
	if st := s.Stats(); st.Running != 2 || running.Load() != 2 {
		t.Errorf("without Checkpoints both tasks keep their slots: Running %d (fn running %d), want 2", st.Running, running.Load())
	}
	// A third task waits: the slot the first to end frees is lent.
	third, err := s.Go(context.Background(), func(*Task) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	once.Do(func() { close(release) })
	wg.Wait()
	if err := third.Wait(); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Completed != 3 {
		t.Errorf("Completed %d, want 3", st.Completed)
	}
}

// spin computes for about d.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
