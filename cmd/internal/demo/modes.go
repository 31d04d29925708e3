// The isolation modes and the scheduler settings that `cpusched serve`
// and `cpusched bench` accept, checked once for both.

package demo

import (
	"fmt"
	"time"

	"github.com/cpusched/cpusched"
)

// ModeNames returns the names of the isolation modes this build supports,
// in the order of cpusched.IsolationModes.
func ModeNames() []string {
	var names []string
	for _, m := range cpusched.IsolationModes() {
		names = append(names, m.String())
	}
	return names
}

// OverrideError is a Config setting that overrides the isolation mode's
// own choice, out of the range the scheduler accepts.
type OverrideError struct {
	Field string // "Workers" or "Slice", as Config names it
	Flag  string // the flag that sets it: "-workers" or "-slice"
	Value any    // as given
	Err   error  // the scheduler's, which names the range
}

func (e *OverrideError) Error() string { return fmt.Sprintf("%s %v: %v", e.Flag, e.Value, e.Err) }

func (e *OverrideError) Unwrap() error { return e.Err }

// CheckOverrides checks a Config's Workers and Slice as cpusched.New will
// (0 keeps the mode's own), so that a bad value is found before a server
// starts; it returns the first out of range as an *OverrideError.
func CheckOverrides(workers int, slice time.Duration) error {
	if workers != 0 {
		if err := cpusched.CheckOptions(cpusched.WithWorkers(workers)); err != nil {
			return &OverrideError{Field: "Workers", Flag: "-workers", Value: workers, Err: err}
		}
	}
	if slice != 0 {
		if err := cpusched.CheckOptions(cpusched.WithSlice(slice)); err != nil {
			return &OverrideError{Field: "Slice", Flag: "-slice", Value: slice, Err: err}
		}
	}
	return nil
}
