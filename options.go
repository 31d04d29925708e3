package cpusched

// Scheduler options: the defaults, their ranges, and New's configuration.

import (
	"fmt"
	"log/slog"
	"time"
)

// Default values of the scheduler's options.
const (
	// DefaultSlice is the time slice of IsolationReserve and IsolationNone:
	// how long a task runs before a Checkpoint gives its worker slot to a
	// waiting task. It is cpuworker's default. A shorter slice lowers the
	// wait of queued tasks and raises the number of switches; 1 ms keeps
	// switching below 0.1% of the slot time (a switch costs about a
	// microsecond: an estimate, see
	// docs/measurements/ospriority-settings.md#open). IsolationOSPriority's
	// default slice is 10 ms instead (WithSlice says why).
	DefaultSlice = time.Millisecond
	// DefaultQueueLimit is the most tasks that may wait to start.
	DefaultQueueLimit = 1 << 16
	// DefaultGroupWeight is the weight of a group nobody set, as cgroup v2's
	// cpu.weight default.
	DefaultGroupWeight = 100
)

// Limits of the options, as their errors quote them; CheckOptions and
// CheckTaskOptions check them for tools that validate input up front.
const (
	minWorkers     = 1
	maxWorkers     = 1024
	minSlice       = 50 * time.Microsecond
	maxSlice       = 100 * time.Millisecond
	minQueueLimit  = 1
	maxQueueLimit  = 1 << 24
	minGroupWeight = 1
	maxGroupWeight = 10000
)

// The nice levels WithNice accepts: Linux's range, exported for programs
// that map their own input (a header, a query parameter) to nice levels.
const (
	MinNice = -20
	MaxNice = 19
)

// config is what the Options set; New fills in the defaults first.
type config struct {
	workers         int // 0: from the isolation mode
	slice           time.Duration
	queueLimit      int
	isolation       Isolation
	explicitWorkers bool
	explicitSlice   bool
	logger          *slog.Logger // nil: silent
	cpuLimit        cpuLimit     // the cgroup CPU limit IsolationOSPriority's default workers follow

	clock clock      // the system's; the package's tests inject their own (withClock)
	hooks *testHooks // the package's test seams (testhooks.go); nil in production
}

// An Option configures a Scheduler in New.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithWorkers sets the number of tasks that may run at once (worker slots),
// 1..1024. It overrides the count the isolation mode would choose.
func WithWorkers(n int) Option {
	return optionFunc(func(c *config) error {
		if n < minWorkers || n > maxWorkers {
			return fmt.Errorf("cpusched: WithWorkers(%d): workers must be in %d..%d", n, minWorkers, maxWorkers)
		}
		c.workers = n
		return nil
	})
}

// WithSlice sets the scheduler's time slice, 50us..100ms: how long a task
// runs before a Checkpoint gives its worker slot to a waiting task. The
// default follows the isolation mode in effect: DefaultSlice (1 ms) in
// IsolationReserve and IsolationNone, 10 ms in IsolationOSPriority, where
// the kernel already preempts tasks for the rest of the program and the
// slice only orders the tasks among themselves. ClassBatch tasks run four
// times the slice (at most 100 ms); WithTaskSlice sets one task's own.
func WithSlice(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < minSlice || d > maxSlice {
			return fmt.Errorf("cpusched: WithSlice(%v): slice must be in %v..%v", d, minSlice, maxSlice)
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
		if n < minQueueLimit || n > maxQueueLimit {
			return fmt.Errorf("cpusched: WithQueueLimit(%d): limit must be in %d..%d", n, minQueueLimit, maxQueueLimit)
		}
		c.queueLimit = n
		return nil
	})
}

// WithLogger sets the logger of the scheduler's own events, which are few.
// From New and Close: the mode in effect and its worker count and slice,
// a cgroup CPU limit that sets the worker count, GOMAXPROCS raised and
// restored, every task handed off where a thread cannot be raised or the
// process has one CPU (Info); the fallback from IsolationOSPriority to
// IsolationReserve, a cgroup limit that could not be read (Warn). While it
// runs, in IsolationOSPriority: each switch into and out of the contended
// state, when other processes keep the CPUs busy (with the rule that
// decided and its reading: the others' CPUs, the windows a lowered thread
// starved) and when they have gone quiet, with GOMAXPROCS raised or
// lowered for it (Info); a thread whose
// priority or CPU mask could not be changed (Warn). Tasks are never
// logged. The default, and nil, is silence.
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

// CheckOptions returns the error New would return for opts (an
// out-of-range worker count, slice or queue limit, an unknown isolation
// mode), or nil, without starting anything: a way for a tool to reject bad
// flags before it starts work. It does not probe thread priorities.
func CheckOptions(opts ...Option) error {
	_, err := applyOptions(config{}, opts)
	return err
}

// applyOptions is the one place Options are applied to c (nil ones are
// skipped); the first out-of-range option's error stops it.
func applyOptions(c config, opts []Option) (config, error) {
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}

func newConfig(opts []Option) (config, error) {
	c := config{
		slice:      DefaultSlice,
		queueLimit: DefaultQueueLimit,
		isolation:  DefaultIsolation(),
		clock:      systemClock{},
	}
	c, err := applyOptions(c, opts)
	if err != nil {
		return config{}, err
	}
	c.explicitWorkers = c.workers != 0
	if c.isolation == IsolationOSPriority && !c.explicitSlice {
		c.slice = osPrioritySlice
	}
	if c.workers == 0 {
		procs := procsBudget()
		switch c.isolation {
		case IsolationNone:
			c.workers = procs
		case IsolationOSPriority:
			c.workers, c.cpuLimit = osPriorityWorkers(procs, c.hooks.osAccess().cgroupLimit)
		default:
			c.workers = reserveWorkers(procs)
		}
	}
	return c, nil
}
