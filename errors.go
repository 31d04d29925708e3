package cpusched

// The errors Run, Go and Wait return.

import (
	"errors"
	"fmt"
)

// Errors returned by the Scheduler.
var (
	// ErrClosed is returned for work submitted after Close, and for queued
	// tasks that Close removed.
	ErrClosed = errors.New("cpusched: scheduler closed")
	// ErrQueueFull is returned by Run and Go when the queue limit of tasks
	// waiting to start is reached.
	ErrQueueFull = errors.New("cpusched: queue full")
)

// errGoexit is the error recorded for a task whose fn called runtime.Goexit.
var errGoexit = errors.New("cpusched: task called runtime.Goexit")

// PanicError is returned by Run and Wait when the task's fn panicked. The
// panic is recovered: it neither kills the process nor leaks the slot.
type PanicError struct {
	Value any    // the value passed to panic
	Stack []byte // the panicking goroutine's stack
}

// Error returns the panic value and the stack.
func (p *PanicError) Error() string {
	return fmt.Sprintf("cpusched: task panicked: %v\n\n%s", p.Value, p.Stack)
}

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	if err, ok := p.Value.(error); ok {
		return err
	}
	return nil
}
