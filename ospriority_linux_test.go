//go:build linux

// IsolationOSPriority on Linux: the mode end to end (threads lowered and
// put back), yield on wake (ospriority.go), and the helpers the mode's
// other tests share.

package cpusched

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
	"golang.org/x/sys/unix"
)

func TestOSPriorityMode(t *testing.T) {
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	if err := probeOSPriority(); err != nil {
		t.Skipf("this machine refuses lowering a thread's priority (%v); TestOSPriorityFallback covers it", err)
	}
	procsBefore := runtime.GOMAXPROCS(0)
	threadsBefore := threadCount(t)
	s, err := New(WithIsolation(IsolationOSPriority), withoutGuard())
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
	if !s.osOwn() {
		t.Fatal("tasks are handed to hand-off threads, want them on their own goroutines (can this process raise a thread back?)")
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
				if long = threadPolicy(t); long == unix.SCHED_IDLE {
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
	if short != 0 || long != unix.SCHED_IDLE || after != 0 {
		t.Errorf("thread policy: %d in a short task, %d in a long one (5 s), %d after; want 0, %d (SCHED_IDLE), 0",
			short, long, after, unix.SCHED_IDLE)
	}
	// Handing tasks off, even a short task runs on a lowered hand-off thread.
	h, err := New(WithIsolation(IsolationOSPriority), withOSHandoff(), withoutGuard())
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
	if short != unix.SCHED_IDLE {
		t.Errorf("hand-off thread policy = %d, want %d (SCHED_IDLE)", short, unix.SCHED_IDLE)
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

func init() { countLowered, describeLowered = loweredThreads, describeLoweredThreads }

// describeLoweredThreads says, for each thread loweredThreads counts, its
// id, name, state, policy and nice (sched_getattr, and fields 3, 19 and
// 41 of /proc/self/task/TID/stat) and kernel wait channel: enough to
// tell a thread parked in the runtime's pool (an idle M, state S in
// futex_wait) from one running a goroutine.
func describeLoweredThreads(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return "no /proc/self/task"
	}
	var b strings.Builder
	for _, e := range entries {
		tid, err := strconv.Atoi(e.Name())
		if err != nil || tid == os.Getpid() {
			continue
		}
		attr, err := unix.SchedGetAttr(tid, 0)
		if err != nil || int(attr.Policy) != unix.SCHED_IDLE {
			continue
		}
		dir := "/proc/self/task/" + e.Name()
		state, nice, policy := "?", "?", "?"
		if stat, err := os.ReadFile(dir + "/stat"); err == nil {
			// The fields after the name, which ends in ')': state is 3,
			// nice 19, policy 41.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
				if f := strings.Fields(string(stat[i+1:])); len(f) > 38 {
					state, nice, policy = f[0], f[16], f[38]
				}
			}
		}
		comm, _ := os.ReadFile(dir + "/comm")
		wchan, _ := os.ReadFile(dir + "/wchan")
		fmt.Fprintf(&b, "thread %d (%s): state %s, sched_getattr policy %d nice %d, stat policy %s nice %s, wchan %q; ",
			tid, strings.TrimSpace(string(comm)), state, attr.Policy, attr.Nice, policy, nice, wchan)
	}
	return b.String()
}

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
		if int(attr.Policy) == unix.SCHED_IDLE { // SCHED_IDLE: nothing else here uses it
			n++
		}
	}
	return n
}

// ownScheduler returns an IsolationOSPriority Scheduler whose tasks run on
// their own goroutines, or skips the test where a lowered thread cannot
// be raised back. Its guard is off (withoutGuard): these tests are of the
// lowering, which a busy test machine must not turn off.
func ownScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withoutGuard()}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if !s.osOwn() {
		t.Skip("a lowered thread cannot be raised back here: tasks are handed off")
	}
	return s
}

// handoffScheduler returns an IsolationOSPriority Scheduler that hands
// every task to a hand-off thread (withOSHandoff), closed when the test
// ends; its guard is off, as ownScheduler's.
func handoffScheduler(t *testing.T, opts ...Option) *Scheduler {
	t.Helper()
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withOSHandoff(), withoutGuard()}, opts...)...)
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

// TestLoweredThreadsYieldOnWake: a lowered thread offers its CPU once as it
// runs again after sleeping (yieldWoken), on both wakes: a task parked at a
// Checkpoint given its slot back, and an idle hand-off thread given a task.
func TestLoweredThreadsYieldOnWake(t *testing.T) {
	needOSPriority(t)
	var yields, unlowered atomic.Int64
	onYield := func(bool) {
		attr, err := unix.SchedGetAttr(0, 0)
		if err != nil || attr.Policy != unix.SCHED_IDLE {
			unlowered.Add(1)
		}
		yields.Add(1)
	}
	s := handoffScheduler(t, WithWorkers(1), WithSlice(minSlice), withYieldWoken(onYield))
	ctx := context.Background()

	// Two tasks that take turns on the one slot: each resume follows a park.
	// They compute for 20 ms, and on until they have taken turns twice (for
	// up to 10 s): beside busy processes a SCHED_IDLE thread may get no CPU
	// for all of the 20 ms, and end it without a Checkpoint at which to park.
	takeTurns := func(tk *Task) error {
		start := time.Now()
		for i := 0; i%64 != 0 || time.Since(start) < 20*time.Millisecond ||
			s.Stats().Preempted < 2 && time.Since(start) < 10*time.Second; i++ {
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
		return nil
	}
	runConcurrently(t, s, 2, takeTurns)
	parks := s.Stats().Preempted
	if parks == 0 {
		t.Fatal("the two tasks never took turns at a Checkpoint")
	}
	if got := uint64(yields.Load()); got < parks {
		t.Errorf("%d yields on waking for %d parked tasks given their slot back", got, parks)
	}

	// A task of more than callerSpin leaves its thread waiting on its
	// channel (not spinning); the next task wakes it.
	long := func(*Task) error {
		for end := time.Now().Add(2 * time.Millisecond); time.Now().Before(end); {
		}
		return nil
	}
	for range 3 {
		before := yields.Load()
		if err := s.Run(ctx, long); err != nil {
			t.Fatal(err)
		}
		// Past threadSpin, and until an idle thread waits and none spins,
		// so that the next task wakes a sleeping thread: beside busy
		// processes a SCHED_IDLE thread may take longer than any fixed
		// sleep to go idle, or to see its spin end.
		time.Sleep(10 * threadSpin)
		waitFor(t, func() bool { return sleepingIdleThreads(s) })
		if err := s.Run(ctx, long); err != nil {
			t.Fatal(err)
		}
		if yields.Load() == before {
			t.Error("an idle hand-off thread given a task did not yield on waking")
		}
	}
	if n := unlowered.Load(); n > 0 {
		t.Errorf("%d yields on a thread that was not lowered to SCHED_IDLE", n)
	}
}
