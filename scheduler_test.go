package cpusched

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// newTestScheduler returns a Scheduler in IsolationReserve (tasks on the
// caller's goroutine, 1 ms slices) unless opts say otherwise; ospriority_test.go
// covers IsolationOSPriority.
func newTestScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	s, err := New(append([]Option{WithIsolation(IsolationReserve)}, opts...)...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// checkIdentity checks the Stats identity at a quiet moment.
func checkIdentity(t *testing.T, st Stats) {
	t.Helper()
	sum := st.Completed + st.Failed + st.Canceled + st.Panicked + uint64(st.Queued) + uint64(st.Started)
	if st.Submitted != sum {
		t.Errorf("Submitted = %d, want Completed+Failed+Canceled+Panicked+Queued+Started = %d (%+v)", st.Submitted, sum, st)
	}
}

func TestNewOptionErrors(t *testing.T) {
	tests := []struct {
		name string
		opt  Option
		want string // "" means no error
	}{
		{"workers ok", WithWorkers(4), ""},
		{"workers 0", WithWorkers(0), "WithWorkers(0): workers must be in 1..1024"},
		{"workers 1025", WithWorkers(1025), "1..1024"},
		{"slice ok", WithSlice(time.Millisecond), ""},
		{"slice short", WithSlice(10 * time.Microsecond), "WithSlice(10µs): slice must be in 50µs..100ms"},
		{"slice long", WithSlice(time.Second), "50µs..100ms"},
		{"queue 0", WithQueueLimit(0), "WithQueueLimit(0): limit must be in 1..16777216"},
		{"queue big", WithQueueLimit(1<<24 + 1), "1..16777216"},
		{"isolation bad", WithIsolation(Isolation(99)), "WithIsolation(99): mode must be one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opt)
			if s != nil {
				defer s.Close(context.Background())
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestTaskOptionErrors(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	tests := []struct {
		opt  TaskOption
		want string
	}{
		{WithNice(-21), "WithNice(-21): nice must be in -20..19"},
		{WithNice(20), "-20..19"},
		{WithClass(Class(7)), "WithClass(7)"},
		{WithTaskSlice(time.Nanosecond), "WithTaskSlice(1ns): slice must be in 50µs..100ms"},
		{WithGroup(strings.Repeat("g", 300)), "must be at most 256"},
	}
	for _, tt := range tests {
		ran := false
		err := s.Run(context.Background(), func(*Task) error { ran = true; return nil }, tt.opt)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Run: got error %v, want one containing %q", err, tt.want)
		}
		h, err := s.Go(context.Background(), func(*Task) error { ran = true; return nil }, tt.opt)
		if h != nil || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Go: got %v, %v, want nil handle and an error containing %q", h, err, tt.want)
		}
		if ran {
			t.Errorf("fn ran despite option error %q", tt.want)
		}
	}
	if err := s.Run(context.Background(), nil); err == nil {
		t.Errorf("Run(nil fn): got nil error, want one")
	}
	st := s.Stats()
	if want := uint64(2*len(tests) + 1); st.Rejected != want {
		t.Errorf("Rejected = %d, want %d", st.Rejected, want)
	}
	if st.Submitted != 0 {
		t.Errorf("Submitted = %d, want 0", st.Submitted)
	}
}

func TestReserveWorkerCount(t *testing.T) {
	for _, tt := range []struct{ procs, want int }{
		{1, 1}, {2, 1}, {3, 2}, {5, 4}, {6, 4}, {7, 5}, {8, 6}, {16, 12}, {64, 48},
	} {
		if got := reserveWorkers(tt.procs); got != tt.want {
			t.Errorf("reserveWorkers(%d) = %d, want %d", tt.procs, got, tt.want)
		}
	}
	procs := runtime.GOMAXPROCS(0)
	for _, tt := range []struct {
		opts []Option
		want int
	}{
		{[]Option{WithIsolation(IsolationReserve)}, reserveWorkers(procs)},
		{[]Option{WithIsolation(IsolationNone)}, procs},
		{[]Option{WithIsolation(IsolationNone), WithWorkers(7)}, 7},
		{[]Option{WithWorkers(3), WithIsolation(IsolationReserve)}, 3},
	} {
		s, err := New(tt.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Workers(); got != tt.want {
			t.Errorf("Workers() = %d, want %d", got, tt.want)
		}
		s.Close(context.Background())
	}
}

func TestRunResults(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	errBoom := errors.New("boom")
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
		t.Errorf("Run(nil-returning fn) = %v, want nil", err)
	}
	if err := s.Run(context.Background(), func(*Task) error { return errBoom }); err != errBoom {
		t.Errorf("Run(failing fn) = %v, want %v", err, errBoom)
	}
	err := s.Run(context.Background(), func(*Task) error { panic("kaboom") })
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "kaboom" || !strings.Contains(string(pe.Stack), "TestRunResults") {
		t.Errorf("Run(panicking fn) = %v, want *PanicError with value kaboom and the stack", err)
	}
	err = s.Run(context.Background(), func(*Task) error { panic(errBoom) })
	if !errors.Is(err, errBoom) {
		t.Errorf("Run(fn panicking with an error) = %v, want it to unwrap to %v", err, errBoom)
	}
	// The slot was not leaked by the panics: another task runs.
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
		t.Errorf("Run after panics = %v, want nil", err)
	}
	st := s.Stats()
	if st.Completed != 2 || st.Failed != 1 || st.Panicked != 2 || st.Running != 0 {
		t.Errorf("Stats = %+v, want Completed 2, Failed 1, Panicked 2, Running 0", st)
	}
	checkIdentity(t, st)
}

func TestGoexitEndsTask(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	h, err := s.Go(context.Background(), func(*Task) error { runtime.Goexit(); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Wait(); !errors.Is(err, errGoexit) {
		t.Errorf("Wait = %v, want errGoexit", err)
	}
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
		t.Errorf("Run after Goexit = %v, want nil (slot must be free)", err)
	}
}

// holdSlot starts a task that holds one slot until release is closed.
func holdSlot(t *testing.T, s *Scheduler, opts ...TaskOption) (release func(), h *Handle) {
	t.Helper()
	started := make(chan struct{})
	stop := make(chan struct{})
	h, err := s.Go(context.Background(), func(*Task) error { close(started); <-stop; return nil }, opts...)
	if err != nil {
		t.Fatal(err)
	}
	<-started
	var once sync.Once
	return func() { once.Do(func() { close(stop) }) }, h
}

func TestGoQueuesWithoutGoroutines(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	release, _ := holdSlot(t, s)
	before := runtime.NumGoroutine()
	const n = 1000
	var ran atomic.Int64
	handles := make([]*Handle, n)
	for i := range handles {
		h, err := s.Go(context.Background(), func(*Task) error { ran.Add(1); return nil })
		if err != nil {
			t.Fatal(err)
		}
		handles[i] = h
	}
	if got := runtime.NumGoroutine() - before; got > 2 {
		t.Errorf("%d queued Go tasks added %d goroutines, want none", n, got)
	}
	if st := s.Stats(); st.Queued != n {
		t.Errorf("Queued = %d, want %d", st.Queued, n)
	}
	release()
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if ran.Load() != n {
		t.Errorf("ran %d tasks, want %d", ran.Load(), n)
	}
	checkIdentity(t, s.Stats())
}

// TestQueuedTaskMemory pins "a queued task costs at most 512 bytes".
func TestQueuedTaskMemory(t *testing.T) {
	for _, cancelable := range []bool{false, true} {
		s := newTestScheduler(t, WithWorkers(1), WithQueueLimit(1<<20))
		release, _ := holdSlot(t, s)
		ctx := context.Background()
		if cancelable {
			var cancel context.CancelFunc
			ctx, cancel = context.WithCancel(ctx)
			defer cancel()
		}
		fn := func(*Task) error { return nil }
		const n = 20000
		handles := make([]*Handle, 0, n)
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for range n {
			h, err := s.Go(ctx, fn)
			if err != nil {
				t.Fatal(err)
			}
			handles = append(handles, h)
		}
		runtime.GC()
		runtime.ReadMemStats(&m1)
		per := (int64(m1.HeapAlloc) - int64(m0.HeapAlloc)) / n
		t.Logf("cancelable=%v: %d bytes per queued task", cancelable, per)
		if per > 512 {
			t.Errorf("cancelable=%v: a queued task costs %d bytes, want at most 512", cancelable, per)
		}
		release()
		for _, h := range handles {
			h.Wait()
		}
	}
}

func TestQueueFull(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1), WithQueueLimit(2))
	release, _ := holdSlot(t, s)
	defer release()
	for i := range 2 {
		if _, err := s.Go(context.Background(), func(*Task) error { return nil }); err != nil {
			t.Fatalf("Go #%d: %v", i, err)
		}
	}
	start := time.Now()
	if _, err := s.Go(context.Background(), func(*Task) error { return nil }); err != ErrQueueFull {
		t.Errorf("Go on a full queue = %v, want ErrQueueFull", err)
	}
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != ErrQueueFull {
		t.Errorf("Run on a full queue = %v, want ErrQueueFull", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("refusals took %v, want them immediate", d)
	}
	if st := s.Stats(); st.Rejected != 2 {
		t.Errorf("Rejected = %d, want 2", st.Rejected)
	}
}

func TestContextEndsWhileQueued(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	release, _ := holdSlot(t, s)
	defer release()

	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{}, 2)
	h, err := s.Go(ctx, func(*Task) error { ran <- struct{}{}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- s.Run(ctx, func(*Task) error { ran <- struct{}{}; return nil }) }()
	waitFor(t, func() bool { return s.Stats().Queued == 2 })
	cancel()
	if err := h.Wait(); err != context.Canceled {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	select {
	case err := <-runErr:
		if err != context.Canceled {
			t.Errorf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context was cancelled while queued")
	}
	st := s.Stats()
	if st.Queued != 0 || st.Canceled != 2 {
		t.Errorf("Stats = %+v, want Queued 0, Canceled 2", st)
	}
	checkIdentity(t, st)
	release()
	select {
	case <-ran:
		t.Error("a task whose context ended while queued ran")
	case <-time.After(50 * time.Millisecond):
	}
}

func TestExpiredContextNeverStarts(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(2))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran := false
	if err := s.Run(ctx, func(*Task) error { ran = true; return nil }); err != context.Canceled {
		t.Errorf("Run = %v, want context.Canceled", err)
	}
	h, err := s.Go(ctx, func(*Task) error { ran = true; return nil })
	if err != nil {
		t.Fatalf("Go = %v, want the task accepted and ended", err)
	}
	if err := h.Wait(); err != context.Canceled {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
	if ran {
		t.Error("fn ran with an expired context")
	}
	st := s.Stats()
	if st.Canceled != 2 {
		t.Errorf("Canceled = %d, want 2", st.Canceled)
	}
	checkIdentity(t, st)
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

func errString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}

func TestIdleSchedulerHasNoTicker(t *testing.T) {
	s := newTestScheduler(t, WithWorkers(1))
	release, h := holdSlot(t, s)
	hb, _ := s.Go(context.Background(), func(*Task) error { return nil })
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return s.watching })
	release()
	h.Wait()
	hb.Wait()
	waitFor(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.watching })
}
