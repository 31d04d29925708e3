package cpusched

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/osprio"
)

// The knobs of TestStress.
const (
	stressTasksEnv     = "CPUSCHED_STRESS_TASKS" // accepted tasks per mode
	stressSeedEnv      = "CPUSCHED_STRESS_SEED"  // replays a logged seed
	stressDefaultTasks = 20000
	stressShortTasks   = 3000 // with -short
	// stressStall is how long a mode may go without any call returning
	// before the watchdog dumps every goroutine and fails the test.
	stressStall = 2 * time.Minute
	// stressOwnThreads bounds the process's threads after the
	// IsolationOSPriority rounds with tasks on their own goroutines.
	stressOwnThreads = 400
)

// TestStress drives the Scheduler in every isolation mode, and in
// IsolationOSPriority's hand-off to hand-off threads, with many random
// concurrent operations and checks that nothing is lost, counted twice or
// leaked.
//
// Each mode runs rounds until its quota of tasks has been accepted. A round
// makes a Scheduler with 1..3 workers, a random queue limit and slice, and
// lets 8-32 submitters call Run (inline or from a goroutine) and Go, with
// every class, nice level, a few groups, task slices, WithIdleRelease,
// now and then an out-of-range option, and contexts cancelled before submission, while
// queued, during the run (by the task itself) or after the end, with short
// deadlines, or shared by many tasks. Task bodies return nil or an error,
// panic, call runtime.Goexit, spin through Checkpoints for tens to hundreds
// of microseconds, wait in Blocking calls (sleeping, panicking, nested,
// calling Checkpoint inside), or sleep without Blocking between spins. Meanwhile one goroutine sets group weights
// (valid and not) and checks Stats, and, in most rounds, another Closes the
// scheduler at a random moment: without a deadline, with one already
// expired, short or long, sometimes twice at once, sometimes while a task
// that only ends when Close gives up is running.
//
// Checks: every call returns exactly once, with what its fn did (fn's
// error, a *PanicError with its value, errGoexit) or, if fn never ran,
// ErrClosed, ErrQueueFull, the option's error or its context's error; fn
// runs at most once; Wait and Done agree; calls made after Close returned
// get ErrClosed; Checkpoint fails only with the context's error, or
// ErrClosed once Close may have given up; Close returns nil or its ctx's
// error, and the error when a task was still running as its ctx ended; at
// every Stats call Submitted == Completed+Failed+Canceled+Panicked+Queued+
// Started, Running <= Workers (plus the started tasks with WithIdleRelease,
// which take their slots back past it), Queued <= the queue limit and no counter goes
// back; after the last Close nothing is queued, running or blocked,
// Submitted+Rejected is the number of calls, Completed the number that
// returned nil and Panicked the number that returned a *PanicError. After
// each mode no goroutine is left (leakcheck) and, on Linux, no more than
// GOMAXPROCS+4 threads were added (GOMAXPROCS as IsolationOSPriority
// raised it, plus the workers where it locks the tasks' own goroutines).
// A watchdog dumps every goroutine and
// fails the test if no call returns for stressStall, or if the mode would
// outlive its share of the test's deadline.
//
// Knobs: CPUSCHED_STRESS_TASKS=N accepted tasks per mode (default 20000,
// 3000 with -short; for 1000000 give go test -timeout 0); the seed of the
// random choices is logged, and CPUSCHED_STRESS_SEED=S replays it (the
// choices, not the timing).
func TestStress(t *testing.T) {
	tasks := stressTasks(t)
	seed := stressSeed(t)
	t.Logf("seed %d (replay with %s=%d), %d tasks per mode", seed, stressSeedEnv, seed, tasks)
	// Every mode, and IsolationOSPriority's hand-off to hand-off threads
	// (where a lowered thread cannot be raised back; withOSHandoff).
	type stressVariant struct {
		name       string
		mode       Isolation
		handoff    bool
		lending    bool
		contention bool
		unraisable bool
	}
	var modes []stressVariant
	for _, mode := range IsolationModes() {
		modes = append(modes, stressVariant{name: mode.String(), mode: mode})
	}
	modes = append(modes, stressVariant{name: "ospriority-handoff", mode: IsolationOSPriority, handoff: true},
		stressVariant{name: "ospriority-lending", mode: IsolationOSPriority, lending: true},
		stressVariant{name: "ospriority-contended", mode: IsolationOSPriority, contention: true},
		stressVariant{name: "ospriority-handoff-contended", mode: IsolationOSPriority, handoff: true, contention: true},
		stressVariant{name: "ospriority-unraisable-contended", mode: IsolationOSPriority, handoff: true, contention: true, unraisable: true})
	for i, v := range modes {
		t.Run(v.name, func(t *testing.T) {
			m := &stressMode{
				t:          t,
				name:       v.name,
				mode:       v.mode,
				handoff:    v.handoff,
				lending:    v.lending,
				contention: v.contention,
				unraisable: v.unraisable,
				seed:       seed,
				tasks:      tasks,
				rng:        rand.New(rand.NewPCG(seed, uint64(i))),
			}
			m.run(len(modes) - i)
		})
	}
}

func stressTasks(t *testing.T) int {
	if v := os.Getenv(stressTasksEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of tasks per mode", stressTasksEnv, v)
		}
		return n
	}
	if testing.Short() {
		return stressShortTasks
	}
	return stressDefaultTasks
}

func stressSeed(t *testing.T) uint64 {
	if v := os.Getenv(stressSeedEnv); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", stressSeedEnv, v)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// countLowered counts the process's lowered threads where it can
// (loweredThreads, on Linux).
var countLowered func(*testing.T) int

// describeLowered says what each of the process's lowered threads is,
// where it can (describeLoweredThreads, on Linux).
var describeLowered func(*testing.T) string

// stressMode is one isolation mode's run: its rounds, their totals, and
// what the watchdog looks at.
type stressMode struct {
	t       *testing.T
	name    string // the mode's, or "ospriority-handoff"
	mode    Isolation
	handoff bool // IsolationOSPriority hands tasks to hand-off threads (withOSHandoff)
	lending bool // the lender sees the rest of the program busy and quiet by turns (stressLoad)
	// contention: the guard sees other processes busy and quiet by turns,
	// and task threads starved at random (stressMachine)
	contention bool
	// unraisable: New is told a lowered thread cannot be raised back, so
	// contended, tasks leave their hand-off threads (retire.go)
	unraisable bool
	seed       uint64
	tasks      int
	rng        *rand.Rand // the rounds' choices; each goroutine gets its own from it

	// The most GOMAXPROCS and workers of its rounds (written by the rounds'
	// goroutine, read after it is done), for the thread check.
	procsSeen, workersSeen int

	failures atomic.Int64 // reported so far (the first 30 are printed)
	returned atomic.Int64 // calls that have returned: the watchdog's sign of life
	// threads maps a thread id to the last call whose fn began or ended
	// on it (noteThread), for the check that no lowered thread is left.
	threads sync.Map
	round   atomic.Value // string: the round in progress, for the watchdog
}

// stressTotals add up the rounds of a mode.
type stressTotals struct {
	rounds, calls, gaveUp                 int
	accepted, completed, failed, canceled uint64
	panicked, rejected, preempted         uint64
	contentions                           uint64
	retired, loose                        uint64
	idleReleases                          uint64
	kept, keptTaken                       uint64
	maxQueueWait                          time.Duration
}

func (m *stressMode) errorf(format string, args ...any) {
	if m.failures.Add(1) <= 30 {
		m.t.Errorf(format, args...)
	} else {
		m.t.Fail()
	}
}

// run runs the rounds under the watchdog, then checks for leaks.
func (m *stressMode) run(modesLeft int) {
	t := m.t
	ignore := leakcheck.Current()
	threadsBefore := 0
	if runtime.GOOS == "linux" {
		threadsBefore = threadCount(t)
	}
	start := time.Now()
	done := make(chan stressTotals, 1)
	go func() { done <- m.rounds() }()
	tot := m.watch(done, modesLeft)
	t.Logf("%d rounds, %d calls in %v: %d accepted (%d completed, %d failed, %d canceled, %d panicked), %d rejected, %d preemptions, %d Closes gave up, max queue wait %v",
		tot.rounds, tot.calls, time.Since(start).Round(time.Millisecond), tot.accepted, tot.completed, tot.failed, tot.canceled, tot.panicked, tot.rejected, tot.preempted, tot.gaveUp, tot.maxQueueWait)

	if m.mode == IsolationOSPriority {
		t.Logf("%d idle releases (WithIdleRelease)", tot.idleReleases)
	}
	t.Logf("%d slots kept at a task's end, %d of them taken by a new task", tot.kept, tot.keptTaken)
	if m.contention {
		t.Logf("the guard turned contended %d times", tot.contentions)
		if tot.contentions == 0 {
			t.Errorf("the guard never turned contended: the contended paths went untested")
		}
		if m.unraisable {
			t.Logf("%d lowered threads retired, %d left loose", tot.retired, tot.loose)
			if tot.retired == 0 {
				t.Errorf("no task left its lowered thread: the retiring paths went untested")
			}
		}
	}
	leakcheck.VerifyNone(t, ignore)
	if runtime.GOOS == "linux" {
		// Locked hand-off threads exit with their goroutines; idle Ms the
		// runtime made for the Ps stay (IsolationOSPriority raised
		// GOMAXPROCS during the rounds), so allow a few. Where tasks run
		// on their own goroutines in IsolationOSPriority, every started
		// task's goroutine is locked to its thread until it ends, so the
		// runtime made an M per task parked at once, and keeps them idle
		// (it never ends an M): what must not stay is a lowered thread.
		// So do tasks of a handed-off mode while the guard was contended
		// (dispatch): the real guard may turn so on a busy machine. The
		// slack of 8: on a busy machine the runtime starts Ms for Ps whose
		// threads stay long in system calls (CI once counted 20 against
		// a slack of 4's 19, the guard's turns not recorded); a leak of
		// hand-off threads is one per task, far past it.
		limit := threadsBefore + max(runtime.GOMAXPROCS(0), m.procsSeen) + 8
		if m.mode == IsolationOSPriority && (!m.handoff || tot.contentions > 0) {
			limit = stressOwnThreads
			m.checkNoneLowered()
		}
		got := threadCount(t)
		for deadline := time.Now().Add(10 * time.Second); got > limit && time.Now().Before(deadline); got = threadCount(t) {
			time.Sleep(10 * time.Millisecond)
		}
		if got > limit {
			t.Errorf("threads: %d before the mode, %d after, want at most %d (the guard turned contended %d times)", threadsBefore, got, limit, tot.contentions)
		} else {
			t.Logf("threads: %d before the mode, %d after (at most %d)", threadsBefore, got, limit)
		}
	}
}

// watch waits for the rounds to end. If no call returns for stressStall,
// or the mode would overrun its share of the test's deadline, it prints
// every goroutine's stack and panics: the rounds' goroutines are stuck, so
// failing the test and going on would only hang later.
func (m *stressMode) watch(done <-chan stressTotals, modesLeft int) stressTotals {
	var hardStop time.Time
	if dl, ok := m.t.Deadline(); ok {
		share := (time.Until(dl) - 10*time.Second) / time.Duration(modesLeft)
		hardStop = time.Now().Add(max(share, 10*time.Second))
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	last, lastChange := m.returned.Load(), time.Now()
	for {
		select {
		case tot := <-done:
			return tot
		case now := <-tick.C:
			if n := m.returned.Load(); n != last {
				last, lastChange = n, now
			}
			why := ""
			switch {
			case now.Sub(lastChange) > stressStall:
				why = fmt.Sprintf("no call returned for %v", stressStall)
			case !hardStop.IsZero() && now.After(hardStop):
				why = "the mode would overrun its share of the test's deadline (-timeout)"
			default:
				continue
			}
			buf := make([]byte, 64<<20)
			buf = buf[:runtime.Stack(buf, true)]
			fmt.Fprintf(os.Stderr, "TestStress/%s (seed %d): %s, %d calls returned, in %v\n\nall goroutines:\n\n%s\n", m.name, m.seed, why, last, m.round.Load(), buf)
			panic(fmt.Sprintf("TestStress/%s (%s=%d): %s; goroutine dump above", m.name, stressSeedEnv, m.seed, why))
		}
	}
}

// rounds runs rounds until m.tasks tasks were accepted or one failed.
func (m *stressMode) rounds() stressTotals {
	var tot stressTotals
	hi := max(100, min(3000, m.tasks/6)) // calls per round: hi/4..hi
	for tot.accepted < uint64(m.tasks) && m.failures.Load() == 0 {
		r := m.newRound(tot.rounds, hi/4+m.rng.IntN(hi-hi/4+1))
		m.round.Store(r.desc)
		st, calls := r.run()
		tot.rounds++
		tot.calls += calls
		tot.accepted += st.Submitted
		tot.completed += st.Completed
		tot.failed += st.Failed
		tot.canceled += st.Canceled
		tot.panicked += st.Panicked
		tot.rejected += st.Rejected
		tot.preempted += st.Preempted
		tot.contentions += st.Contentions
		tot.idleReleases += st.IdleReleases
		tot.kept += st.KeptSlots
		tot.keptTaken += st.KeptTaken
		tot.retired += st.RetiredThreads
		tot.loose += st.LooseThreads
		tot.maxQueueWait = max(tot.maxQueueWait, st.MaxQueueWait)
		if r.gaveUp {
			tot.gaveUp++
		}
	}
	return tot
}

// noteThread records that c's fn, running as task, began or ended (what)
// on the calling thread.
func (m *stressMode) noteThread(c *stressCall, what string, task *Task) {
	if m.mode == IsolationOSPriority {
		m.threads.Store(int32(osprio.ThreadID()), fmt.Sprintf("%s %s on it, its task lowered %v", c, what, task.os.lowered.Load()))
	}
}

// checkNoneLowered checks, after a mode with tasks on their own
// goroutines, that no thread of the process is left lowered within 10 s.
// If one is, it says which (describeLowered), which call last began or
// ended on it, and whether it is still lowered, or gone, 20 s later.
func (m *stressMode) checkNoneLowered() {
	t := m.t
	if countLowered == nil {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for countLowered(t) > 0 {
		if time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			continue
		}
		what := describeLowered(t)
		var last []string
		m.threads.Range(func(tid, call any) bool {
			if strings.Contains(what, fmt.Sprintf("thread %d ", tid)) {
				last = append(last, fmt.Sprintf("thread %d: last %v", tid, call))
			}
			return true
		})
		t.Errorf("%d lowered threads alive 10 s after the mode: %s; %s", countLowered(t), what, strings.Join(last, "; "))
		for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && countLowered(t) > 0; {
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("20 s later: %d lowered threads: %s", countLowered(t), describeLowered(t))
		return
	}
}
