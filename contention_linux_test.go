package cpusched

// The guard against outside contention (contention.go), driven by a fake
// machine: tasks run on real threads, whose policies the tests read, and
// the guard's windows are real (a few milliseconds), but what it reads of
// the process's and the machine's CPU time is the test's.

import (
	"bytes"
	"context"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cpusched/cpusched/internal/cpuscope"
	"github.com/cpusched/cpusched/internal/osprio"
)

// fakeMachine is a guard source the test turns busy (other processes
// take the CPUs, the task threads get none) or quiet (the process gets
// every CPU, nobody else runs).
type fakeMachine struct {
	busy  atomic.Bool
	start time.Time
	mu    sync.Mutex
	other int64 // the others' CPU time so far
	last  time.Time
}

func newFakeMachine(busy bool) *fakeMachine {
	m := &fakeMachine{start: time.Now(), last: time.Now()}
	m.busy.Store(busy)
	return m
}

const fakeCPUs = 2

func (m *fakeMachine) source() guardSource {
	return guardSource{
		processCPU: func() int64 {
			if m.busy.Load() {
				return 0 // the process gets nothing
			}
			return fakeCPUs * int64(time.Since(m.start))
		},
		threadCPU: func(int) int64 {
			if m.busy.Load() {
				return 0 // starved
			}
			return int64(time.Since(m.start))
		},
		machine: func() (cpuscope.Sample, bool) {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.busy.Load() {
				m.other += fakeCPUs * int64(time.Since(m.last))
			}
			m.last = time.Now()
			proc := int64(0)
			if !m.busy.Load() {
				proc = fakeCPUs * int64(time.Since(m.start))
			}
			return cpuscope.Sample{CPUs: fakeCPUs, Busy: m.other + proc}, true
		},
		window: 2 * time.Millisecond,
		calm:   20 * time.Millisecond,
	}
}

// guardedScheduler returns an IsolationOSPriority Scheduler whose tasks
// run on their own goroutines and whose guard reads m, or skips the test
// where a lowered thread cannot be raised back.
func guardedScheduler(t *testing.T, m *fakeMachine, opts ...Option) *Scheduler {
	t.Helper()
	needOSPriority(t)
	s, err := New(append([]Option{WithIsolation(IsolationOSPriority), withGuardSource(m.source())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	if !s.osOwn() {
		t.Skip("a lowered thread cannot be raised back here: tasks are handed off")
	}
	return s
}

// runningTask starts a task that computes, with Checkpoints, until stop is
// closed, and reports its thread id once it has one.
func runningTask(t *testing.T, s *Scheduler, stop chan struct{}) (tid int) {
	t.Helper()
	tids := make(chan int, 1)
	go s.Run(context.Background(), func(tk *Task) error {
		tids <- unix.Gettid()
		for {
			select {
			case <-stop:
				return nil
			default:
			}
			if err := tk.Checkpoint(); err != nil {
				return err
			}
		}
	})
	return <-tids
}

func policyOf(t *testing.T, tid int) int {
	attr, err := unix.SchedGetAttr(tid, 0)
	if err != nil {
		t.Fatalf("sched_getattr(%d): %v", tid, err)
	}
	return int(attr.Policy)
}

// TestGuardKeepsThreadsNormalBesideBusyProcesses: tasks that begin while
// other processes keep the CPUs busy are never lowered, and the scheduler
// says it is contended, and stays so while they stay busy.
func TestGuardKeepsThreadsNormalBesideBusyProcesses(t *testing.T) {
	m := newFakeMachine(true)
	var log lockedBuffer
	s := guardedScheduler(t, m, WithWorkers(1), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	stop := make(chan struct{})
	defer close(stop)
	tid := runningTask(t, s, stop)
	if !within(5*time.Second, func() bool { return s.Stats().Contended }) {
		t.Fatal("the guard did not turn contended beside a busy machine")
	}
	time.Sleep(50 * time.Millisecond) // many windows, far past osLowerAfter
	if p := policyOf(t, tid); p != 0 {
		t.Errorf("the task's thread has policy %d while contended, want 0 (normal)", p)
	}
	// Two calm windows and more have passed, none calm: the guard must not
	// have turned quiet to try.
	if st := s.Stats(); !st.Contended || st.Contentions != 1 {
		t.Errorf("Stats: Contended %v, Contentions %d while the others stayed busy, want true, 1", st.Contended, st.Contentions)
	}
	// The log names the rule that turned it and the reading behind it.
	if got := log.String(); !strings.Contains(got, "keep the CPUs busy") || !strings.Contains(got, "rule=") || !strings.Contains(got, "others_cpus=") {
		t.Errorf("log %q: want the turn to contended with its rule and the others' CPUs", got)
	}
}

// lockedBuffer is a bytes.Buffer that a logger writes while a test reads.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestGuardRaisesAndLowersAgain: on a quiet machine a long task's thread is
// lowered after the first window; once other processes starve it, the
// guard raises it back; once they have gone quiet for a calm window, it
// is lowered again. Stats count the contention.
func TestGuardRaisesAndLowersAgain(t *testing.T) {
	m := newFakeMachine(false)
	s := guardedScheduler(t, m, WithWorkers(1))
	stop := make(chan struct{})
	defer close(stop)
	tid := runningTask(t, s, stop)
	idle := unix.SCHED_IDLE
	if !within(5*time.Second, func() bool { return policyOf(t, tid) == idle }) {
		t.Fatal("a long task's thread was not lowered on a quiet machine")
	}
	m.busy.Store(true)
	if !within(5*time.Second, func() bool { return policyOf(t, tid) == 0 }) {
		t.Fatal("the starved thread was not raised back")
	}
	if st := s.Stats(); !st.Contended || st.Contentions != 1 {
		t.Errorf("got Contended %v, Contentions %d; want true, 1", st.Contended, st.Contentions)
	}
	m.busy.Store(false)
	if !within(5*time.Second, func() bool { return policyOf(t, tid) == idle }) {
		t.Fatal("the thread was not lowered again once the machine was quiet")
	}
	if st := s.Stats(); st.Contended || st.ContendedTime <= 0 {
		t.Errorf("got Contended %v, ContendedTime %v; want false and some time", st.Contended, st.ContendedTime)
	}
}

// TestGuardBusyBeforeTasksBegin: where other processes kept the CPUs busy
// over the pause before the tasks began, the first task's thread is never
// lowered: the scheduler is contended before it would be.
func TestGuardBusyBeforeTasksBegin(t *testing.T) {
	m := newFakeMachine(true)
	s := guardedScheduler(t, m, WithWorkers(1))
	time.Sleep(100 * time.Millisecond) // far past the machine's watch (20 windows)
	var policy int
	err := s.Run(context.Background(), func(tk *Task) error {
		spinUntil(func() bool { tk.Checkpoint(); return tk.os.lowered.Load() })
		policy = policyOf(t, unix.Gettid())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if policy != 0 {
		t.Errorf("the first task's thread had policy %d once long, want 0", policy)
	}
	if !s.Stats().Contended {
		t.Error("the scheduler is not contended")
	}
}

// TestNoLendWhileContended: a slot lent while the machine was quiet comes
// back when the guard turns contended, none is lent while it stays so
// (the rest of the program still reads busy), and lending resumes once it
// turns quiet.
func TestNoLendWhileContended(t *testing.T) {
	needOSPriority(t)
	m := newFakeMachine(false)
	load := &fakeLoad{}
	load.busy.Store(true)
	s, err := New(WithIsolation(IsolationOSPriority), WithWorkers(2), withGuardSource(m.source()),
		withLendSample(200*time.Microsecond, load.sample))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	stop := make(chan struct{})
	var stopOnce sync.Once
	defer stopOnce.Do(func() { close(stop) }) // before Close, on a failure
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Run(context.Background(), func(tk *Task) error {
				for {
					select {
					case <-stop:
						return nil
					default:
					}
					spin(20 * time.Microsecond)
					if err := tk.Checkpoint(); err != nil {
						return err
					}
				}
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	if !within(10*time.Second, func() bool { st := s.Stats(); return st.Lent == 1 && st.Running == 1 }) {
		st := s.Stats()
		t.Fatalf("quiet machine, rest busy: Lent %d Running %d after 10 s, want 1 and 1", st.Lent, st.Running)
	}
	m.busy.Store(true)
	if !within(10*time.Second, func() bool { st := s.Stats(); return st.Contended && st.Lent == 0 && st.Running == 2 }) {
		st := s.Stats()
		t.Fatalf("contended: Contended %v Lent %d Running %d after 10 s, want true, 0, 2", st.Contended, st.Lent, st.Running)
	}
	lends := s.Stats().Lends
	for range 50 { // many lend windows (4 ms each here), the rest still busy
		time.Sleep(time.Millisecond)
		if st := s.Stats(); st.Lent != 0 && st.Contended {
			t.Fatalf("a slot lent while contended: Lent %d (Lends %d, %d before)", st.Lent, st.Lends, lends)
		}
	}
	m.busy.Store(false)
	if !within(10*time.Second, func() bool { st := s.Stats(); return !st.Contended && st.Lent == 1 }) {
		st := s.Stats()
		t.Fatalf("quiet again, rest busy: Contended %v Lent %d after 10 s, want false, 1", st.Contended, st.Lent)
	}
	stopOnce.Do(func() { close(stop) })
	wg.Wait()
}

// TestGuardShortSlicesWhileContended: while the scheduler is contended,
// the process's threads at the kernel's own slice (here one that runs no
// task) take contendedKernelSlice, and get the kernel's back when it
// turns quiet, and when it closes while contended.
func TestGuardShortSlicesWhileContended(t *testing.T) {
	base := osprio.BaseSlice()
	if base <= 0 {
		t.Skip("this kernel reports no time slice (before Linux 6.12)")
	}
	// The test's own thread runs no task.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	sliceIs := func(want time.Duration) func() bool {
		return func() bool {
			attr, err := unix.SchedGetAttr(tid, 0)
			return err == nil && time.Duration(attr.Runtime) == want
		}
	}

	m := newFakeMachine(false)
	s := guardedScheduler(t, m, WithWorkers(1))
	stop := make(chan struct{})
	var stopOnce sync.Once
	end := func() { stopOnce.Do(func() { close(stop) }) }
	t.Cleanup(end) // before guardedScheduler's Close, should the test stop early
	runningTask(t, s, stop)
	if !sliceIs(base)() {
		t.Fatalf("quiet: the thread's slice is not the kernel's %v", base)
	}
	m.busy.Store(true)
	if !within(5*time.Second, sliceIs(contendedKernelSlice)) {
		t.Fatalf("contended: the thread's slice did not become %v", contendedKernelSlice)
	}
	m.busy.Store(false)
	if !within(5*time.Second, sliceIs(base)) {
		t.Fatalf("quiet again: the thread's slice did not go back to %v", base)
	}
	m.busy.Store(true)
	if !within(5*time.Second, sliceIs(contendedKernelSlice)) {
		t.Fatalf("contended again: the thread's slice did not become %v", contendedKernelSlice)
	}
	end()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !sliceIs(base)() {
		t.Errorf("closed while contended: the thread's slice is not the kernel's %v", base)
	}
}
