//go:build linux

package cpusched

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strconv"
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
	if !s.osOwn {
		t.Fatal("tasks are handed to worker threads, want them on their own goroutines (can this process raise a thread back?)")
	}
	// A short task runs on Run's own thread at its normal priority; a long
	// one's thread is lowered once it has computed for osLowerAfter,
	// and put back when it returns.
	runtime.LockOSThread() // so that "after" reads the thread the tasks ran on
	short, long, after := -1, -1, -1
	err = s.Run(context.Background(), func(*Task) error {
		short = threadPolicy(t)
		return nil
	})
	if err == nil {
		err = s.Run(context.Background(), func(*Task) error {
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
				if long = threadPolicy(t); long == defaultOSPolicy.Sched {
					break
				}
			}
			return nil
		})
	}
	after = threadPolicy(t)
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	if short != 0 || long != defaultOSPolicy.Sched || after != 0 {
		t.Errorf("thread policy: %d in a short task, %d in a long one (5 s), %d after; want 0, %d (%s), 0",
			short, long, after, defaultOSPolicy.Sched, defaultOSPolicy.Name)
	}
	// Handing tasks off, even a short task runs on a lowered worker thread.
	h, err := New(WithIsolation(IsolationOSPriority), withOSHandoff())
	if err != nil {
		t.Fatal(err)
	}
	err = h.Run(context.Background(), func(*Task) error {
		short = threadPolicy(t)
		return nil
	})
	h.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if short != defaultOSPolicy.Sched {
		t.Errorf("worker thread policy = %d, want %d (%s)", short, defaultOSPolicy.Sched, defaultOSPolicy.Name)
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
	// Worker threads exit locked, so the runtime discards them: no thread
	// at the lowered policy may remain. (Idle Ms the runtime made for the
	// extra P, or for syscalls on a busy machine, may stay: it never frees
	// idle Ms, so the thread count itself is no measure.)
	waitFor(t, func() bool { return loweredThreads(t) == 0 })
	t.Logf("threads: %d before, %d after Close, none lowered", threadsBefore, threadCount(t))
}

func init() { countLowered = loweredThreads }

// threadPolicy returns the calling thread's scheduling policy.
func threadPolicy(t *testing.T) int {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		t.Error(err)
		return -1
	}
	return int(attr.Policy)
}

// loweredThreads counts this process's threads whose scheduling policy is
// the one IsolationOSPriority lowers its workers to, but for the main
// thread: a worker (or New's probe) that ran on it leaves it lowered, since
// the runtime cannot end the main thread when a locked goroutine exits and
// parks it for good instead.
func loweredThreads(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	n := 0
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == os.Getpid() {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread exited meanwhile
		}
		if int(attr.Policy) == defaultOSPolicy.Sched { // SCHED_IDLE: nothing else here uses it
			n++
		}
	}
	return n
}

// TestRunWhileWorkersParkIsRaceFree pins a data race: in
// IsolationOSPriority, Run read its task's wake channel field without the
// lock while the task's worker made that channel when the task first parked
// at a Checkpoint or came back from Blocking. Run now waits only on the
// task's done channel. Run with -race.
func TestRunWhileWorkersParkIsRaceFree(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1), WithSlice(minSlice))
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

// cgroupChildEnv marks the child process of
// TestOSPriorityWorkersUnderACgroupLimit; its value is the GOMAXPROCS
// variable the parent set ("" for none) and so the worker count to expect.
const cgroupChildEnv = "CPUSCHED_TEST_CGROUP_CHILD"

// TestOSPriorityWorkersUnderACgroupLimit runs the test binary inside a real
// cgroup limited to 1.5 CPUs (root only): the default Scheduler there
// reads the limit and runs 1 worker, unless the GOMAXPROCS variable is set.
func TestOSPriorityWorkersUnderACgroupLimit(t *testing.T) {
	if want, ok := os.LookupEnv(cgroupChildEnv); ok {
		checkWorkersInCgroupChild(t, want)
		return
	}
	if err := probeOSPriority(defaultOSPolicy); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	if runtime.NumCPU() != 2 {
		t.Skip("the expected counts are for 2 CPUs")
	}
	procs := makeTestCgroup(t, 1.5)
	for _, env := range []string{"", "2"} {
		// The shell moves itself into the cgroup, then becomes the test
		// binary, which so starts there (the runtime reads the limit at
		// start-up).
		cmd := exec.Command("/bin/sh", "-c", `echo $$ > "$1" || exit 126; shift; exec "$@"`, "sh", procs,
			os.Args[0], "-test.run=^TestOSPriorityWorkersUnderACgroupLimit$", "-test.v")
		cmd.Env = append(os.Environ(), cgroupChildEnv+"="+env)
		if env != "" {
			cmd.Env = append(cmd.Env, "GOMAXPROCS="+env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "workers checked") {
			t.Errorf("child in a 1.5-CPU cgroup, GOMAXPROCS=%q: %v\n%s", env, err, out)
		}
	}
}

func checkWorkersInCgroupChild(t *testing.T, env string) {
	cpus, ok, err := cgroupLimit()
	if err != nil || !ok || cpus != 1.5 {
		t.Fatalf("the child read the limit as %v, %v, %v; want 1.5", cpus, ok, err)
	}
	want := 1
	if env != "" {
		want = 2 // the operator's GOMAXPROCS is the budget
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS at start = %d, want 2 (the runtime's max(2, ceil(1.5)))", got)
	}
	s, err := New()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if st := s.Stats(); st.Isolation != IsolationOSPriority {
		t.Skipf("isolation %v", st.Isolation)
	}
	if got := s.Workers(); got != want {
		t.Errorf("Workers = %d, want %d (GOMAXPROCS variable %q)", got, want, env)
	}
	t.Log("workers checked")
}

// makeTestCgroup makes a cpu cgroup limited to cpus CPUs (cgroup v1's cpu
// hierarchy, or v2 with the cpu controller delegated), removed when the
// test ends, and returns its cgroup.procs file. It skips the test where
// that cannot be done (not root, no writable cpu controller).
func makeTestCgroup(t *testing.T, cpus float64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a cgroup needs root")
	}
	const period = 100000
	quota := strconv.Itoa(int(cpus * period))
	name := fmt.Sprintf("cpusched-test-%d", os.Getpid())
	var dir string
	var files [][2]string
	if sub, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(string(sub), "cpu") {
		dir = filepath.Join("/sys/fs/cgroup", name)
		files = [][2]string{{"cpu.max", quota + " " + strconv.Itoa(period)}}
	} else if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"); err == nil {
		dir = filepath.Join("/sys/fs/cgroup/cpu", name)
		files = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", quota}}
	} else {
		t.Skip("no cgroup cpu controller to make a cgroup in")
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("removing the test cgroup: %v", err)
		}
	})
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "cgroup.procs")
}

// TestOSWorkerHandOff drives the worker hand-off (osWorker) from both
// sides: a dispatcher gives tasks to a worker right away (while it spins)
// or after pauses longer than workerSpin (once it has parked). Every task
// must arrive once and in order, and both ways must have been taken. Run
// with -race.
func TestOSWorkerHandOff(t *testing.T) {
	const n = 3000
	w := &osWorker{next: make(chan *Task, 1)}
	idle := make(chan *osWorker, 1) // stands for s.osIdle
	tasks := make([]*Task, n)
	for i := range tasks {
		tasks[i] = &Task{runIdx: int32(i)}
	}
	got := make(chan int32, n)
	go func() {
		for {
			w.state.Store(workerSpinning)
			idle <- w
			tk := w.await()
			if tk == stopWorker {
				close(got)
				return
			}
			got <- tk.runIdx
		}
	}()
	var awake, parked int
	for i, tk := range tasks {
		if i%10 == 9 {
			time.Sleep(2 * workerSpin)
		}
		if (<-idle).give(tk) {
			awake++
		} else {
			parked++
		}
	}
	(<-idle).give(stopWorker)
	next := int32(0)
	for idx := range got {
		if idx != next {
			t.Fatalf("task %d arrived after task %d", idx, next-1)
		}
		next++
	}
	if next != n {
		t.Fatalf("%d of %d tasks arrived", next, n)
	}
	t.Logf("%d given to a spinning worker, %d to a parked one", awake, parked)
	if awake == 0 || parked == 0 {
		t.Errorf("awake %d, parked %d: want both ways taken", awake, parked)
	}
}

// TestIdleOSWorkersPark checks that the workers' spin after a task is
// bounded: once the tasks have ended, every idle worker parks (an idle
// scheduler costs no CPU).
func TestIdleOSWorkersPark(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(2))
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	waitFor(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, w := range s.osIdle {
			if w.state.Load() != workerParked {
				return false
			}
		}
		return len(s.osIdle) > 0
	})
}

// TestBlockingHoldGivesTheSlotUp: where IsolationOSPriority hands tasks
// to worker threads (and for tasks on lowered threads), a Blocking call
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
// to worker threads (and for tasks on lowered threads), a Blocking call
// keeps the task's slot while the task's earlier calls have been
// short (a moving average under blockHold), even with another task
// waiting, and gives it up at once after long ones and on the first call. (Whether the slot then stays kept
// depends on the worker thread getting the CPU within blockHold, which a
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
			tk.blockAvg = int64(avg) // as if its earlier calls took avg
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

// TestLaneCountsCPUTimeInOSPriority: a task that holds its slot for 5 ms
// without using the CPU (here it sleeps; on a busy machine its SCHED_IDLE
// thread may simply not run) is still within its first slice in
// IsolationOSPriority, where the lane counts the worker thread's CPU time,
// so a new small task does not take its slot at its next Checkpoint. In
// IsolationReserve, which counts slot time, it does. (A task on its own
// goroutine counts at most osLowerAfter until its thread is lowered,
// TestSetCPUOfOwnTasks; the worker threads of the hand-off are where this
// test's premise is about the CPU clock from the start.)
func TestLaneCountsCPUTimeInOSPriority(t *testing.T) {
	for _, mode := range []Isolation{IsolationOSPriority, IsolationReserve} {
		t.Run(mode.String(), func(t *testing.T) {
			s, err := New(WithIsolation(mode), WithWorkers(1), withOSHandoff())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(context.Background())
			var mu sync.Mutex
			var order []string
			note := func(x string) { mu.Lock(); order = append(order, x); mu.Unlock() }
			slept, queued := make(chan struct{}), make(chan struct{})
			ha, err := s.Go(context.Background(), func(tk *Task) error {
				time.Sleep(5 * time.Millisecond)
				close(slept)
				<-queued
				if err := tk.Checkpoint(); err != nil {
					return err
				}
				note("A")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			<-slept
			hb, err := s.Go(context.Background(), func(*Task) error { note("B"); return nil })
			if err != nil {
				t.Fatal(err)
			}
			close(queued)
			if err := ha.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := hb.Wait(); err != nil {
				t.Fatal(err)
			}
			want := []string{"A", "B"}
			if mode == IsolationReserve {
				want = []string{"B", "A"}
			}
			if !slices.Equal(order, want) {
				t.Errorf("order %v, want %v", order, want)
			}
		})
	}
}

// TestFirstBlockingCallFollowsTheOthers: where IsolationOSPriority hands
// tasks to worker threads, a task's first Blocking call keeps the slot
// when the scheduler's recent calls were short, and gives it up when they
// were long.
func TestFirstBlockingCallFollowsTheOthers(t *testing.T) {
	s := handoffScheduler(t, WithWorkers(1))
	firstKept := func(d time.Duration) bool {
		for range 8 { // calls of d by other tasks
			if err := s.Run(context.Background(), func(tk *Task) error {
				tk.Blocking(func() { time.Sleep(d) })
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

// ownScheduler returns an IsolationOSPriority Scheduler whose tasks run on
// their own goroutines, or skips the test where a lowered thread cannot
// be raised back.
func ownScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if !s.osOwn {
		t.Skip("a lowered thread cannot be raised back here: tasks are handed off")
	}
	return s
}

// handoffScheduler returns an IsolationOSPriority Scheduler that hands
// every task to a worker thread (withOSHandoff), closed when the test ends.
func handoffScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withOSHandoff()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// spinUntil computes until cond holds, for at most 5 s, and reports
// whether it did.
func spinUntil(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if cond() {
			return true
		}
	}
	return false
}

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
		waiter = tk.lowered.Load()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx, func(tk *Task) error {
		computer = spinUntil(tk.lowered.Load)
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
		if !spinUntil(outer.lowered.Load) {
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
	idle := defaultOSPolicy.Sched
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
// function whose tasks turn out long is handed off to worker threads from
// its fourth task on, and goes back to its own goroutines after two short
// ones have brought its score down; another function's short tasks stay on
// their own goroutines throughout.
func TestDispatchFollowsTaskLength(t *testing.T) {
	s := ownScheduler(t, WithWorkers(1))
	ctx := context.Background()
	long := true
	var handedOff []bool
	work := func(tk *Task) error {
		handedOff = append(handedOff, tk.handoff)
		switch {
		case long && !tk.handoff:
			// Long on its own goroutine: until the monitor lowers it.
			if !spinUntil(tk.lowered.Load) {
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
		otherOff = otherOff || tk.handoff
		return nil
	}
	if lengthSlot(reflect.ValueOf(work).Pointer()) == lengthSlot(reflect.ValueOf(other).Pointer()) {
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
		sleeper = tk.lowered.Load()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Run(ctx, func(tk *Task) error {
		computer = spinUntil(func() bool {
			tk.Checkpoint()
			return tk.lowered.Load()
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
				return in.lowered.Load()
			})
			// The outer task computed all that on this thread too: its
			// own check finds the thread lowered already.
			outerLowered = spinUntil(func() bool {
				outer.Checkpoint()
				return outer.lowered.Load()
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
