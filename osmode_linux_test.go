//go:build linux

package cpusched

import (
	"context"
	"os"
	"os/exec"
	"runtime"
	"strings"
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
	if st.Workers != procsBefore {
		t.Errorf("Workers = %d, want GOMAXPROCS %d", st.Workers, procsBefore)
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

// budgetChildEnv marks the child process of TestOSPriorityBudgetFromEnv.
const budgetChildEnv = "CPUSCHED_TEST_BUDGET_CHILD"

// TestOSPriorityBudgetFromEnv checks that IsolationOSPriority takes its
// worker count from GOMAXPROCS as the operator set it, not from NumCPU:
// with GOMAXPROCS=1 in the environment, New gets 1 worker and raises
// GOMAXPROCS to 2, and Close sets 1 again. The environment variable is
// read at process start, so the check runs in a child process.
func TestOSPriorityBudgetFromEnv(t *testing.T) {
	if os.Getenv(budgetChildEnv) != "" {
		checkBudgetInChild(t)
		return
	}
	if err := probeOSPriority(defaultOSPolicy); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOSPriorityBudgetFromEnv$", "-test.v")
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1", budgetChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "budget checked") {
		t.Fatalf("child with GOMAXPROCS=1: %v\n%s", err, out)
	}
}

func checkBudgetInChild(t *testing.T) {
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS at start = %d, want 1 from the environment", got)
	}
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Workers(); got != 1 {
		t.Errorf("Workers = %d, want 1 (GOMAXPROCS=1), not NumCPU %d", got, runtime.NumCPU())
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS while open = %d, want 2 (1 worker + 1 spare)", got)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after Close = %d, want 1 again", got)
	}
	t.Log("budget checked")
}

// TestOSPriorityRestoresProgramsGOMAXPROCS checks the restore when the
// program had set GOMAXPROCS itself: the runtime's default would differ,
// so Close sets the program's value again instead of the default.
func TestOSPriorityRestoresProgramsGOMAXPROCS(t *testing.T) {
	if err := probeOSPriority(defaultOSPolicy); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs so that 1 is not the default")
	}
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Workers(); got != 1 {
		t.Errorf("Workers = %d, want 1 (the program's GOMAXPROCS)", got)
	}
	s.Close(context.Background())
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Errorf("GOMAXPROCS after Close = %d, want the program's 1", got)
	}
}
