//go:build linux

package cpusched

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
	"golang.org/x/sys/unix"
)

func TestOSPriorityMode(t *testing.T) {
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	if err := probeOSPriority(defaultOSPolicy); err != nil {
		t.Skipf("this machine refuses lowering a thread's priority (%v); TestOSPriorityFallback covers it", err)
	}
	procsBefore := runtime.GOMAXPROCS(0)
	threadsBefore := threadCount(t)
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.Isolation != IsolationOSPriority {
		t.Fatalf("Isolation in effect = %v, want ospriority", st.Isolation)
	}
	if st.Workers != runtime.NumCPU() {
		t.Errorf("Workers = %d, want NumCPU %d", st.Workers, runtime.NumCPU())
	}
	if got, want := runtime.GOMAXPROCS(0), max(procsBefore, st.Workers+spareProcs); got != want {
		t.Errorf("GOMAXPROCS = %d during the mode, want %d", got, want)
	}
	// The task runs on a thread whose policy was lowered.
	var policy int
	err = s.Run(context.Background(), func(*Task) error {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			return err
		}
		policy = int(attr.Policy)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if policy != defaultOSPolicy.Sched {
		t.Errorf("worker thread policy = %d, want %d (%s)", policy, defaultOSPolicy.Sched, defaultOSPolicy.Name)
	}
	// Many tasks, some parked at Checkpoints.
	var handles []*Handle
	for range 50 {
		h, err := s.Go(context.Background(), func(t *Task) error {
			for range 1000 {
				if err := t.Checkpoint(); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	for _, h := range handles {
		if err := h.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != procsBefore {
		t.Errorf("GOMAXPROCS after Close = %d, want it restored to %d", got, procsBefore)
	}
	// Worker threads exit locked, so the runtime discards them.
	// Idle Ms the runtime made for the extra P may stay (it never frees
	// idle Ms); the workers' threads must be gone.
	waitFor(t, func() bool { return threadCount(t) <= threadsBefore+spareProcs+2 })
	t.Logf("threads: %d before, %d after Close", threadsBefore, threadCount(t))
}

// TestRunWhileWorkersParkIsRaceFree pins a data race: in
// IsolationOSPriority, Run read its task's wake channel field without the
// lock while the task's worker made that channel when the task first parked
// at a Checkpoint or came back from Blocking. Run now waits only on the
// task's done channel. Run with -race.
func TestRunWhileWorkersParkIsRaceFree(t *testing.T) {
	s, err := New(WithIsolation(IsolationOSPriority), WithWorkers(1), WithSlice(MinSlice))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(context.Background(), func(tk *Task) error {
				if i%2 == 0 {
					tk.Blocking(func() { time.Sleep(10 * time.Microsecond) })
				}
				end := time.Now().Add(50 * time.Microsecond)
				for time.Now().Before(end) {
					if err := tk.Checkpoint(); err != nil {
						return err
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
}
