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
	nice  int
	group string
	slice time.Duration // 0: the scheduler's slice (x4 for ClassBatch)
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
// out-of-range nice level, class or slice, a group name too long), or nil:
// a way to reject bad options once, at setup, rather than on every task.
func CheckTaskOptions(opts ...TaskOption) error {
	_, err := applyTaskOptions(opts)
	return err
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
		tc.nice = n
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
