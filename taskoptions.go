package cpusched

// Task options: class, nice, group and slice of one task, checked once in
// applyTaskOptions.

import (
	"fmt"
	"time"
)

// taskConfig is what the TaskOptions set.
type taskConfig struct {
	class Class
	nice  int32
	// kind and hasKind are WithKind's slot (kind.go); without it, the
	// task's kind is its function's. Beside nice, in what would be
	// padding: the config is copied through every option.
	kind    uint8
	hasKind bool
	group   string
	slice   time.Duration // 0: the scheduler's slice (x4 for ClassBatch)
	// idleRelease is WithIdleRelease's; 0: the task keeps its slot
	// while its thread sleeps.
	idleRelease time.Duration
}

// A TaskOption configures one task in Run or Go.
type TaskOption interface {
	// applyTask takes the config and returns it changed, rather than
	// taking a pointer: a pointer passed to an interface method escapes,
	// which would cost every Run and Go call an allocation for the config.
	applyTask(taskConfig) (taskConfig, error)
}

type taskOptionFunc func(taskConfig) (taskConfig, error)

func (f taskOptionFunc) applyTask(c taskConfig) (taskConfig, error) { return f(c) }

// CheckTaskOptions returns the error Run and Go would return for opts (an
// out-of-range nice level, class, slice or idle release, a group name too
// long), or nil:
// a way to reject bad options once, at setup, rather than on every task.
func CheckTaskOptions(opts ...TaskOption) error {
	_, err := applyTaskOptions(opts)
	return err
}

// TaskOptionsGroup returns the group a task run with opts joins: the name
// of the last WithGroup among them, or "" (the default group) without one.
// For an invalid option it returns "" and the error CheckTaskOptions
// returns. It allocates nothing.
//
// Deprecated: TaskOptionsPlace returns the group with the class and nice
// level, which set a task's wait as much as its group does.
func TaskOptionsGroup(opts ...TaskOption) (string, error) {
	tc, err := applyTaskOptions(opts)
	return tc.group, err
}

// TaskPlace is where a task stands in the policy: its group, its class
// and its nice level, which together set its share of the slots and so
// how long it waits for one. It is comparable, for a map key.
type TaskPlace struct {
	Group string
	Class Class
	Nice  int
}

// TaskOptionsPlace returns the place of a task run with opts: the last
// WithGroup, WithClass and WithNice among them, each its default without
// one. For an invalid option it returns the zero TaskPlace and the error
// CheckTaskOptions returns. An adapter that learns from its calls' waits
// (httpsched's and grpcsched's WithMaxQueueWait keep a limit per place)
// reads it before Run. It allocates nothing.
func TaskOptionsPlace(opts ...TaskOption) (TaskPlace, error) {
	tc, err := applyTaskOptions(opts)
	return TaskPlace{Group: tc.group, Class: tc.class, Nice: int(tc.nice)}, err
}

// applyTaskOptions is the one place TaskOptions are applied (nil ones are
// skipped); the first out-of-range option's error stops it.
func applyTaskOptions(opts []TaskOption) (taskConfig, error) {
	var tc taskConfig
	for _, o := range opts {
		if o == nil {
			continue
		}
		var err error
		if tc, err = o.applyTask(tc); err != nil {
			return taskConfig{}, err
		}
	}
	return tc, nil
}

// WithClass sets the task's class (default ClassNormal).
func WithClass(c Class) TaskOption {
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		if c < ClassNormal || c > ClassIdle {
			return tc, fmt.Errorf("cpusched: WithClass(%d): class must be one of normal(0), realtime(1), batch(2), idle(3)", int(c))
		}
		tc.class = c
		return tc, nil
	})
}

// WithNice sets the task's nice level, -20..19 (default 0). Each step is
// worth about 10% of CPU against a task one step apart: weights follow the
// kernel's table, 1024 at nice 0 and x1.25 a step.
func WithNice(n int) TaskOption {
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		if n < MinNice || n > MaxNice {
			return tc, fmt.Errorf("cpusched: WithNice(%d): nice must be in %d..%d", n, MinNice, MaxNice)
		}
		tc.nice = int32(n)
		return tc, nil
	})
}

// MaxGroupNameLen is the longest group name, in bytes, that WithGroup and
// SetGroupWeight accept: exported, as MinNice and MaxNice are, for
// programs that take group names from their input (a header, a tenant).
const MaxGroupNameLen = 256

// WithGroup puts the task in a group (default ""), whose name is at most
// MaxGroupNameLen bytes. Groups share the CPU by their weights
// (SetGroupWeight) before their tasks share the group's part.
func WithGroup(name string) TaskOption {
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		if len(name) > MaxGroupNameLen {
			return tc, fmt.Errorf("cpusched: WithGroup: name is %d bytes, must be at most %d (MaxGroupNameLen)", len(name), MaxGroupNameLen)
		}
		tc.group = name
		return tc, nil
	})
}

// WithTaskSlice sets the task's own time slice, 50us..100ms (default: the
// scheduler's, see WithSlice). A shorter slice gives the task an earlier
// virtual deadline (lower latency), not more CPU.
func WithTaskSlice(d time.Duration) TaskOption {
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		if d < minSlice || d > maxSlice {
			return tc, fmt.Errorf("cpusched: WithTaskSlice(%v): slice must be in %v..%v", d, minSlice, maxSlice)
		}
		tc.slice = d
		return tc, nil
	})
}

// WithIdleRelease lets the task give its slot up while its thread sleeps
// inside fn without Blocking, d in 1ms..10s (default: off, the task holds
// its slot until it returns, calls Blocking or yields at a Checkpoint).
// It is for handlers that wait mid-way (a database call, a downstream
// request, a lock, a channel) and were not written to call Blocking.
//
// While other tasks wait for a slot, the slice monitor reads the CPU
// clock of the task's thread; once the clock has not moved for d (found
// between d and twice d after the thread went to sleep), the slot goes
// to the next task, as Blocking's does, and the task counts in
// Stats.Blocked and once in Stats.IdleReleases. The monitor keeps
// reading the clock, every d or every 5 ms, whichever is shorter:
// once the thread computes again, the task takes a slot back at once,
// even if every slot is taken, which Stats.Running then shows above
// Workers until a task ends or yields (the first of them to come to a
// Checkpoint gives its slot up). A Checkpoint, Blocking call or the end
// of fn that comes first takes the slot back the same way, and then
// goes on as usual. The idle stretch before the release is charged as
// a Blocking call's kept slot is (a quarter of its slot time), the time
// without a slot not at all, and the CPU the thread used between its
// wake and the retake as run time. The task's Checkpoint costs nothing
// more; each such task costs the monitor one read of a thread's CPU
// clock per look, and its Run or Go one allocation.
//
// It works where the scheduler can read the task's thread's CPU clock:
// in IsolationOSPriority, for a task on its own goroutine (locked to its
// thread while fn runs) and for one handed off to a hand-off thread,
// with or without the privilege to raise threads. It has no effect in
// IsolationReserve and IsolationNone (a goroutine moves between
// threads, so no thread's clock is the task's), nor, without that
// privilege, for the tasks that run on their own goroutines while other
// processes keep the CPUs busy or that left their hand-off threads
// (retire.go): their goroutines are not locked to a thread. A thread
// that the kernel does not run for d but that is runnable (a lowered
// thread beside busier ones) keeps its slot: the monitor reads its state
// (/proc/self/task/TID/stat) where its clock has not moved, and only a
// thread that is not runnable counts as asleep.
func WithIdleRelease(d time.Duration) TaskOption {
	return taskOptionFunc(func(tc taskConfig) (taskConfig, error) {
		if d < minIdleRelease || d > maxIdleRelease {
			return tc, fmt.Errorf("cpusched: WithIdleRelease(%v): d must be in %v..%v", d, minIdleRelease, maxIdleRelease)
		}
		tc.idleRelease = d
		return tc, nil
	})
}
