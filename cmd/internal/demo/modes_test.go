package demo

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

func TestModeNames(t *testing.T) {
	names := ModeNames()
	if len(names) != len(cpusched.IsolationModes()) {
		t.Fatalf("ModeNames() = %q, want one name per cpusched.IsolationModes()", names)
	}
	for _, n := range names {
		if _, err := cpusched.ParseIsolation(n); err != nil {
			t.Errorf("ModeNames() has %q, which cpusched.ParseIsolation refuses: %v", n, err)
		}
	}
}

func TestCheckOverrides(t *testing.T) {
	if err := CheckOverrides(0, 0); err != nil {
		t.Errorf("CheckOverrides(0, 0) = %v, want nil (the mode's own)", err)
	}
	if err := CheckOverrides(1, 4*time.Millisecond); err != nil {
		t.Errorf("CheckOverrides(1, 4ms) = %v, want nil", err)
	}
	for _, c := range []struct {
		workers int
		slice   time.Duration
		field   string
		want    string
	}{
		{-1, 0, "Workers", "-workers -1: cpusched: WithWorkers(-1): workers must be in 1..1024"},
		{2, time.Microsecond, "Slice", "-slice 1µs: cpusched: WithSlice(1µs): slice must be in 50µs..100ms"},
		{-1, time.Microsecond, "Workers", "-workers -1: "}, // the first
	} {
		err := CheckOverrides(c.workers, c.slice)
		var oe *OverrideError
		if !errors.As(err, &oe) || oe.Field != c.field || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("CheckOverrides(%d, %v) = %#v, want an *OverrideError for %s beginning %q", c.workers, c.slice, err, c.field, c.want)
		}
	}
}
