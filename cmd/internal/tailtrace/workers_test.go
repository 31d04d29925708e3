package tailtrace

import (
	"bytes"
	"context"
	"reflect"
	"runtime"
	"runtime/trace"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// TestAnalyzeFindsOSWorkerByItsStack records a trace of a real
// IsolationOSPriority worker and checks that Analyze counts it as a
// cpusched worker. The task the worker runs was accepted before the trace
// began, so it runs no trace region: the worker can be known only by the
// library's worker loop on its stack, under the name the trace reader
// gives that frame (the full import path).
func TestAnalyzeFindsOSWorkerByItsStack(t *testing.T) {
	s, err := cpusched.New(cpusched.WithIsolation(cpusched.IsolationOSPriority), cpusched.WithWorkers(1))
	if err != nil {
		t.Skipf("IsolationOSPriority unavailable: %v", err)
	}
	defer s.Close(context.Background())
	if got := s.Stats().Isolation; got != cpusched.IsolationOSPriority {
		t.Skipf("no thread priorities here: New fell back to %v", got)
	}

	// The library hands a task to a worker thread when the recent tasks of
	// its function were long (or, without the privilege to raise a thread
	// back, always): so fn computes for a few milliseconds a few times
	// first, then waits, as the task the trace sees.
	started, release := make(chan struct{}), make(chan struct{})
	var waitNow atomic.Bool
	fn := func(task *cpusched.Task) error {
		if waitNow.Load() {
			close(started)
			<-release
			return nil
		}
		for end := time.Now().Add(3 * time.Millisecond); time.Now().Before(end); {
			if err := task.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	for range 6 {
		if err := s.Run(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	waitNow.Store(true)
	h, err := s.Go(context.Background(), fn)
	if err != nil {
		t.Fatal(err)
	}
	<-started

	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("tracing unavailable: %v", err)
	}
	// In the trace, the worker wakes, ends its task and parks in its loop,
	// then wakes again to exit when the scheduler closes.
	close(release)
	if err := h.Wait(); err != nil {
		t.Error(err)
	}
	contentions := s.Stats().Contentions
	if err := s.Close(context.Background()); err != nil {
		t.Error(err)
	}
	trace.Stop()

	b, err := Analyze(&buf, Config{TaskType: testTaskType, SeqCategory: testSeqCat})
	if err != nil {
		t.Fatal(err)
	}
	// Idle workers of the pool, left by the long Runs and seen as they
	// exit at Close, count too; none runs a region the trace saw.
	if b.Workers < 1 && contentions > 0 {
		// Beside other busy processes the scheduler turns contended and
		// hands no task off (cpusched's contention.go), so no worker loop
		// ran: nothing to find, which is not Analyze's fault.
		t.Skipf("other processes kept the CPUs busy (%d contentions): no task was handed off", contentions)
	}
	if b.Workers < 1 {
		t.Errorf("Analyze counted %d cpusched worker goroutines, want at least 1 (the IsolationOSPriority worker, known by its stack)", b.Workers)
	}
}

// TestIsWorkerFrame: the worker loop is matched by its frame's full name,
// as the runtime gives it, and by nothing else of that name.
func TestIsWorkerFrame(t *testing.T) {
	// The runtime names the library's functions by the import path that
	// library.go assumes.
	closeFn := runtime.FuncForPC(reflect.ValueOf((*cpusched.Scheduler).Close).Pointer()).Name()
	if want := libraryPath + ".(*Scheduler).Close"; closeFn != want {
		t.Fatalf("the runtime names (*cpusched.Scheduler).Close %q, want %q: libraryPath is not the library's import path", closeFn, want)
	}
	for fn, want := range map[string]bool{
		"github.com/cpusched/cpusched.(*Scheduler).handoffLoop":                   true,
		"cpusched.(*Scheduler).handoffLoop":                                       false, // no frame is named without the path
		"example.com/fork/cpusched.(*Scheduler).handoffLoop":                      false,
		"github.com/cpusched/cpusched/cmd/internal/demo.(*Scheduler).handoffLoop": false,
		"github.com/cpusched/cpusched.(*Scheduler).runGo":                         false,
	} {
		if got := isWorkerFrame(fn); got != want {
			t.Errorf("isWorkerFrame(%q) = %v, want %v", fn, got, want)
		}
	}
}
