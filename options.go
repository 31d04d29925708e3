package cpusched

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/cpusched/cpusched/internal/osprio"
)

// Default values of the scheduler's options.
const (
	// DefaultSlice is the time slice a task runs before Checkpoint lets
	// another task have its worker slot: 1 ms, as cpuworker's default. A
	// shorter slice lowers the wait of queued tasks and raises the number of
	// switches; 1 ms keeps switching below 0.1% of the slot time (a switch
	// costs about a microsecond).
	DefaultSlice = time.Millisecond
	// DefaultQueueLimit is the most tasks that may wait to start.
	DefaultQueueLimit = 1 << 16
	// DefaultGroupWeight is the weight of a group nobody set, as cgroup v2's
	// cpu.weight default.
	DefaultGroupWeight = 100
)

// Limits of the options, as their errors quote them.
const (
	MinWorkers     = 1
	MaxWorkers     = 1024
	MinSlice       = 50 * time.Microsecond
	MaxSlice       = 100 * time.Millisecond
	MinQueueLimit  = 1
	MaxQueueLimit  = 1 << 24
	MinNice        = -20
	MaxNice        = 19
	MinGroupWeight = 1
	MaxGroupWeight = 10000
)

// Isolation says how a Scheduler keeps the goroutines it does not run (the
// rest of the program: HTTP handlers, timers, the netpoller) fast while its
// tasks use the CPU.
type Isolation int

const (
	// IsolationReserve runs tasks on fewer worker slots than GOMAXPROCS, as
	// cpuworker does, so that goroutines outside the scheduler always find a
	// free P: GOMAXPROCS<=2: 1 slot; <=5: n-1; <=7: n-2; else n-n/4. It
	// protects latency by leaving CPUs unused by tasks. It is the default
	// where IsolationOSPriority is not available.
	IsolationReserve Isolation = iota
	// IsolationNone runs tasks on GOMAXPROCS slots: all the CPU for tasks,
	// and no protection for the rest of the program beyond the Go runtime's
	// own round-robin.
	IsolationNone
	// IsolationOSPriority (Linux) runs tasks on GOMAXPROCS worker slots whose
	// goroutines are locked to OS threads at a lower kernel priority, and
	// raises GOMAXPROCS to the worker count plus one: the kernel preempts a
	// worker the moment another thread of the program wakes, so the rest of
	// the program stays fast and the tasks still get every idle cycle.
	// Where thread priorities are unavailable New falls back to
	// IsolationReserve, logs a warning (WithLogger), and Stats reports the mode in effect.
	// Its slice defaults to OSPrioritySlice, and Run hands each task to a
	// worker thread (about 7.2 us serially, 9.5 us in parallel, against
	// 0.38-0.41 us for a goroutine + WaitGroup: BenchmarkRunOSPriority):
	// waking a blocked locked thread and handing it a P is a futex round
	// trip each way. It is the default on Linux.
	IsolationOSPriority
)

// String returns the mode's name as the command line spells it.
func (m Isolation) String() string {
	switch m {
	case IsolationReserve:
		return "reserve"
	case IsolationNone:
		return "none"
	case IsolationOSPriority:
		return "ospriority"
	}
	return fmt.Sprintf("Isolation(%d)", int(m))
}

// ParseIsolation returns the mode named s: "reserve", "none" or, where
// IsolationModes lists it, "ospriority".
func ParseIsolation(s string) (Isolation, error) {
	for _, m := range isolationModes {
		if m.String() == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("cpusched: unknown isolation mode %q (valid: %s)", s, isolationNames())
}

// IsolationModes returns every mode this build supports, in the order the
// benchmark measures them.
func IsolationModes() []Isolation { return append([]Isolation(nil), isolationModes...) }

var isolationModes = []Isolation{IsolationNone, IsolationReserve, IsolationOSPriority}

func isolationNames() string {
	s := ""
	for i, m := range isolationModes {
		if i > 0 {
			s += ", "
		}
		s += m.String()
	}
	return s
}

func (m Isolation) valid() bool {
	for _, v := range isolationModes {
		if v == m {
			return true
		}
	}
	return false
}

// DefaultIsolation returns the mode New uses without WithIsolation:
// IsolationOSPriority on Linux, which measured best (README, "Isolation
// modes": the probe's tail as low as reserve's with 95% of the CPU-heavy
// throughput instead of 56%), IsolationReserve elsewhere.
func DefaultIsolation() Isolation {
	if osprio.Supported() {
		return IsolationOSPriority
	}
	return IsolationReserve
}

// ReserveWorkers returns the worker count IsolationReserve uses for
// GOMAXPROCS procs: cpuworker's rule, which leaves at least one P free.
func ReserveWorkers(procs int) int {
	switch {
	case procs <= 2:
		return 1
	case procs <= 5:
		return procs - 1
	case procs <= 7:
		return procs - 2
	default:
		return procs - procs/4
	}
}

// config is what the Options set; New fills in the defaults first.
type config struct {
	workers         int // 0: from the isolation mode
	slice           time.Duration
	queueLimit      int
	isolation       Isolation
	explicitWorkers bool
	explicitSlice   bool
	clock           clock
	noMonitor       bool          // tests drive slice expiry themselves
	osPolicy        osprio.Policy // IsolationOSPriority's thread setting
	logger          *slog.Logger  // nil: silent
	laneShare       float64       // the small-task lane's budget (runqueue.go)
}

// An Option configures a Scheduler in New.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithWorkers sets the number of tasks that may run at once (worker slots),
// 1..1024. It overrides the count the isolation mode would choose.
func WithWorkers(n int) Option {
	return optionFunc(func(c *config) error {
		if n < MinWorkers || n > MaxWorkers {
			return fmt.Errorf("cpusched: WithWorkers(%d): workers must be in %d..%d", n, MinWorkers, MaxWorkers)
		}
		c.workers = n
		return nil
	})
}

// WithSlice sets the default time slice, 50us..100ms (default 1ms).
func WithSlice(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < MinSlice || d > MaxSlice {
			return fmt.Errorf("cpusched: WithSlice(%v): slice must be in %v..%v", d, MinSlice, MaxSlice)
		}
		c.slice = d
		c.explicitSlice = true
		return nil
	})
}

// WithQueueLimit sets the most tasks that may wait to start, 1..1<<24
// (default 1<<16). Beyond it Run and Go return ErrQueueFull.
func WithQueueLimit(n int) Option {
	return optionFunc(func(c *config) error {
		if n < MinQueueLimit || n > MaxQueueLimit {
			return fmt.Errorf("cpusched: WithQueueLimit(%d): limit must be in %d..%d", n, MinQueueLimit, MaxQueueLimit)
		}
		c.queueLimit = n
		return nil
	})
}

// WithLogger sets the logger of the scheduler's own events, which are few
// and come only from New and Close: the mode in effect and its worker count
// and slice (Info), GOMAXPROCS raised and restored (Info), the fallback from
// IsolationOSPriority to IsolationReserve and a worker thread whose priority
// could not be lowered (Warn). Tasks are never logged. The default, and nil,
// is silence.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		c.logger = l
		return nil
	})
}

// WithIsolation sets how the rest of the program is kept responsive
// (default: DefaultIsolation()).
func WithIsolation(m Isolation) Option {
	return optionFunc(func(c *config) error {
		if !m.valid() {
			return fmt.Errorf("cpusched: WithIsolation(%d): mode must be one of %s", int(m), isolationNames())
		}
		c.isolation = m
		return nil
	})
}

// withClock replaces the clock (tests).
func withClock(c clock) Option {
	return optionFunc(func(cfg *config) error { cfg.clock = c; return nil })
}

// withLaneShare sets the small-task lane's budget, as a share of the slot
// time of each lanePeriod; 0 closes the lane (tests compare with it).
func withLaneShare(share float64) Option {
	return optionFunc(func(cfg *config) error { cfg.laneShare = share; return nil })
}

// withoutMonitor stops New from starting the slice monitor (tests that end
// slices by hand with expireSlices).
func withoutMonitor() Option {
	return optionFunc(func(cfg *config) error { cfg.noMonitor = true; return nil })
}

// OSPrioritySlice is IsolationOSPriority's default slice. In that mode the
// kernel protects the rest of the program, so the slice only orders
// cpusched's own tasks, and every switch between tasks there is a switch
// between locked OS threads, which left the CPUs partly idle: passes/s of
// the demo's CPU-heavy load through cpusched, as a share of the same load
// run directly, were 84% with 1 ms slices and 95% with 10 ms, and the
// probe's p99 3.77 ms against 4.21 ms (cpusched bench -modes ospriority
// -slice 10ms, against the default run at 1 ms; quiet 2-core machine).
// Small tasks pay for it: their p99 rose from 6.5 ms to 11.4 ms, within the
// two slices plus service time a queued task may wait.
const OSPrioritySlice = 10 * time.Millisecond

// defaultOSPolicy is IsolationOSPriority's thread setting. SCHED_IDLE,
// from the prototype measured before this project started on a 2-core machine of this project's kind
// (wrk p99 of /delay1ms under a CPU hog): SCHED_IDLE 2.08 ms, nice 19
// 2.92 ms, nice 10 3.85 ms, reserve 4.60 ms; throughput 103%, 102%, 100%
// and 53% of the unprotected run. With garbage collection busy all three
// thread settings were within 10% (11.1-12.5 ms p99, 84-89% throughput).
// This project's own comparison (CPUSCHED_THREAD_POLICY=idle|nice19|batch10
// cpusched bench -modes reserve,ospriority -step 4s, one run each, on a
// machine shared with other builds) put SCHED_IDLE's hog-sched throughput
// at 104% of direct against 64% (nice19) and 88% (batch10), with p99s of
// 6-11 ms for all three: too noisy to overrule the prototype.
var defaultOSPolicy = osprio.Idle

// osPolicyEnv names the environment variable that overrides the thread
// setting (idle, batch10, nice19, nice10), for measuring the alternatives
// with cpusched bench; it is read by New only in IsolationOSPriority mode.
const osPolicyEnv = "CPUSCHED_THREAD_POLICY"

func newConfig(opts []Option) (config, error) {
	c := config{
		slice:      DefaultSlice,
		queueLimit: DefaultQueueLimit,
		isolation:  DefaultIsolation(),
		clock:      systemClock{},
		osPolicy:   defaultOSPolicy,
		laneShare:  defaultLaneShare,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	if c.isolation == IsolationOSPriority {
		if name := os.Getenv(osPolicyEnv); name != "" {
			p, err := osprio.ParsePolicy(name)
			if err != nil {
				return config{}, fmt.Errorf("cpusched: %s: %w", osPolicyEnv, err)
			}
			c.osPolicy = p
		}
	}
	c.explicitWorkers = c.workers != 0
	if c.isolation == IsolationOSPriority && !c.explicitSlice {
		c.slice = OSPrioritySlice
	}
	if c.workers == 0 {
		procs := procsBudget()
		switch c.isolation {
		case IsolationNone, IsolationOSPriority:
			c.workers = procs
		default:
			c.workers = ReserveWorkers(procs)
		}
	}
	return c, nil
}

// Class is a task's scheduling class, with the meaning of Linux's policies.
type Class int

const (
	// ClassNormal shares the CPU by nice weight and group weight (SCHED_NORMAL).
	ClassNormal Class = iota
	// ClassRealtime runs before every other class, but is throttled to 95% of
	// the slot time in each second while others wait, as the kernel's
	// sched_rt_runtime_us default, so that no other class starves.
	ClassRealtime
	// ClassBatch shares like ClassNormal but never preempts a running task
	// early and runs with slices four times as long (SCHED_BATCH).
	ClassBatch
	// ClassIdle runs only when no Normal, Batch or Realtime task waits, except
	// for a guaranteed 0.3% of the slot time (the share of the kernel's
	// SCHED_IDLE weight 3 against a nice-0 task's 1024) so it still
	// progresses.
	ClassIdle
)

// String returns the class name.
func (c Class) String() string {
	switch c {
	case ClassNormal:
		return "normal"
	case ClassRealtime:
		return "realtime"
	case ClassBatch:
		return "batch"
	case ClassIdle:
		return "idle"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// ParseClass returns the class named s (normal, realtime, batch, idle).
func ParseClass(s string) (Class, error) {
	for c := ClassNormal; c <= ClassIdle; c++ {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, fmt.Errorf("cpusched: unknown class %q (valid: normal, realtime, batch, idle)", s)
}

// numClasses is the number of public classes.
const numClasses = 4

// taskConfig is what the TaskOptions set.
type taskConfig struct {
	class Class
	nice  int
	group string
	slice time.Duration // 0: the scheduler's slice (x4 for ClassBatch)
}

// A TaskOption configures one task in Run or Go.
type TaskOption interface{ applyTask(*taskConfig) error }

type taskOptionFunc func(*taskConfig) error

func (f taskOptionFunc) applyTask(c *taskConfig) error { return f(c) }

// CheckTaskOptions returns the error Run and Go would return for opts (an
// out-of-range nice level, class or slice, a group name too long), or nil:
// a way to reject bad options once, at setup, rather than on every task.
func CheckTaskOptions(opts ...TaskOption) error {
	var tc taskConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.applyTask(&tc); err != nil {
			return err
		}
	}
	return nil
}

// WithClass sets the task's class (default ClassNormal).
func WithClass(c Class) TaskOption {
	return taskOptionFunc(func(tc *taskConfig) error {
		if c < ClassNormal || c > ClassIdle {
			return fmt.Errorf("cpusched: WithClass(%d): class must be one of normal(0), realtime(1), batch(2), idle(3)", int(c))
		}
		tc.class = c
		return nil
	})
}

// WithNice sets the task's nice level, -20..19 (default 0). Each step is
// worth about 10% of CPU against a task one step apart: weights follow the
// kernel's table, 1024 at nice 0 and x1.25 a step.
func WithNice(n int) TaskOption {
	return taskOptionFunc(func(tc *taskConfig) error {
		if n < MinNice || n > MaxNice {
			return fmt.Errorf("cpusched: WithNice(%d): nice must be in %d..%d", n, MinNice, MaxNice)
		}
		tc.nice = n
		return nil
	})
}

// maxGroupLen bounds a group name, in bytes.
const maxGroupLen = 256

// WithGroup puts the task in a group (default ""). Groups share the CPU by
// their weights (SetGroupWeight) before their tasks share the group's part.
func WithGroup(name string) TaskOption {
	return taskOptionFunc(func(tc *taskConfig) error {
		if len(name) > maxGroupLen {
			return fmt.Errorf("cpusched: WithGroup: name is %d bytes, must be at most %d", len(name), maxGroupLen)
		}
		tc.group = name
		return nil
	})
}

// WithTaskSlice sets the task's own time slice, 50us..100ms. A shorter
// slice gives the task an earlier virtual deadline (lower latency), not more
// CPU.
func WithTaskSlice(d time.Duration) TaskOption {
	return taskOptionFunc(func(tc *taskConfig) error {
		if d < MinSlice || d > MaxSlice {
			return fmt.Errorf("cpusched: WithTaskSlice(%v): slice must be in %v..%v", d, MinSlice, MaxSlice)
		}
		tc.slice = d
		return nil
	})
}
