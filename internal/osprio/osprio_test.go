package osprio

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
)

// TestLowerOnLockedThread lowers a throwaway thread: the goroutine exits
// locked, so the runtime discards the thread and the test process keeps
// its priority.
func TestLowerOnLockedThread(t *testing.T) {
	if !Supported() {
		if err := Lower(); err == nil {
			t.Error("Lower on an unsupported platform: got nil error")
		}
		t.Skip("no per-thread priorities here")
	}
	errc := make(chan error)
	go func() {
		runtime.LockOSThread()
		errc <- Lower()
	}()
	if err := <-errc; err != nil {
		t.Errorf("Lower() = %v", err)
	}
}

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// TestThreadCPUCountsThisThreadOnly: on a locked thread, ThreadCPU grows by
// about the CPU the thread used, and not while it sleeps.
func TestThreadCPUCountsThisThreadOnly(t *testing.T) {
	if !Supported() {
		t.Skip("no per-thread CPU clock here")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c0 := ThreadCPU()
	for deadline := time.Now().Add(10 * time.Second); ThreadCPU()-c0 < int64(5*time.Millisecond); {
		if time.Now().After(deadline) {
			t.Fatalf("10 s of spinning counted %v of thread CPU, want 5ms", time.Duration(ThreadCPU()-c0))
		}
	}
	c1 := ThreadCPU()
	time.Sleep(20 * time.Millisecond)
	slept := ThreadCPU() - c1
	if slept > int64(5*time.Millisecond) {
		t.Errorf("20 ms of sleeping counted %v of thread CPU, want under 5ms", time.Duration(slept))
	}
}

// TestThreadCPUOfReadsAnotherThread: ThreadCPUOf, read from another
// goroutine, sees a locked thread's CPU clock as the thread itself does.
func TestThreadCPUOfReadsAnotherThread(t *testing.T) {
	if !Supported() {
		t.Skip("no per-thread CPU clock here")
	}
	type reading struct {
		tid int
		cpu int64
	}
	got := make(chan reading)
	done := make(chan int64)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for c0 := ThreadCPU(); ThreadCPU()-c0 < int64(2*time.Millisecond); {
		}
		got <- reading{ThreadID(), ThreadCPU()}
		<-done
		done <- ThreadCPU()
	}()
	r := <-got
	other := ThreadCPUOf(r.tid)
	done <- 0
	after := <-done
	if other < r.cpu || other > after {
		t.Errorf("ThreadCPUOf = %d, want between the thread's own readings %d and %d", other, r.cpu, after)
	}
	if r.cpu < int64(2*time.Millisecond) {
		t.Errorf("the thread's own reading %d is under the 2 ms it spun", r.cpu)
	}
}

// TestRestore lowers a locked thread and puts its setting back: Current
// sees the lowered setting while lowered and the original after.
func TestRestore(t *testing.T) {
	if !Supported() {
		if _, err := Current(); err == nil {
			t.Error("Current on an unsupported platform: got nil error")
		}
		t.Skip("no per-thread priorities here")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		before, err := Current()
		if err != nil {
			errc <- err
			return
		}
		if err := Lower(); err != nil {
			errc <- err
			return
		}
		if low, err := Current(); err != nil || !low.Lowered() {
			errc <- fmt.Errorf("after Lower: Current = %v, %v", low, err)
			return
		}
		if err := before.Restore(); err != nil {
			errc <- fmt.Errorf("%w (unprivileged? the thread stays locked and is discarded)", err)
			return
		}
		if after, err := Current(); err != nil || after != before {
			errc <- fmt.Errorf("after Restore: Current = %v, %v, want %v", after, err, before)
			return
		}
		runtime.UnlockOSThread()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Error(err)
	}
}

// TestLowerThread lowers a locked thread from another goroutine, as
// cpusched's monitor does, and the thread puts its setting back itself.
func TestLowerThread(t *testing.T) {
	if !Supported() {
		if _, _, err := LowerThread(ThreadID()); err == nil {
			t.Error("LowerThread on an unsupported platform: got nil error")
		}
		t.Skip("no per-thread priorities here")
	}
	type result struct {
		tid    int
		before Attr
		err    error
	}
	locked := make(chan result)
	lowered := make(chan Attr)
	done := make(chan error)
	go func() {
		runtime.LockOSThread()
		before, err := Current()
		locked <- result{ThreadID(), before, err}
		saved := <-lowered
		now, err := Current()
		if err == nil && !now.Lowered() {
			err = fmt.Errorf("the thread is at %v, want SCHED_IDLE", now)
		}
		if err == nil {
			err = saved.Restore()
		}
		if err == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	r := <-locked
	if r.err != nil {
		t.Fatal(r.err)
	}
	saved, ok, err := LowerThread(r.tid)
	if err != nil || !ok || saved != r.before {
		t.Errorf("LowerThread = %v, %v, %v; want %v, true, nil", saved, ok, err, r.before)
	}
	lowered <- saved
	if err := <-done; err != nil {
		t.Error(err)
	}
	// A thread already lowered is left as it is.
	errc := make(chan error)
	go func() {
		runtime.LockOSThread() // exits locked: the runtime discards the thread
		if err := Lower(); err != nil {
			errc <- err
			return
		}
		_, ok, err := LowerThread(ThreadID())
		if err == nil && ok {
			err = errors.New("LowerThread lowered a thread already lowered")
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Error(err)
	}
}
