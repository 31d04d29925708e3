package cpusched

// GOMAXPROCS raised on every platform (procs.go): IsolationReserve's raise
// where its workers would hold every P, alone, overlapping, and beside
// IsolationOSPriority's.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/internal/osprio"
)

// setProcs sets GOMAXPROCS to n, as the program would, until the test
// ends.
func setProcs(t *testing.T, n int) {
	t.Helper()
	prev := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
}

// checkProcs fails t unless GOMAXPROCS is want.
func checkProcs(t *testing.T, when string, want int) {
	t.Helper()
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("GOMAXPROCS %s = %d, want %d", when, got, want)
	}
}

// TestReserveKeepsAPFreeAtGOMAXPROCS1 pins a measured gap: at GOMAXPROCS 1,
// IsolationReserve's 1 worker held the only P, and the rest of the program
// waited for Go's preemption (probe p99 63-81 ms against ospriority's
// 6-7 ms). New raises GOMAXPROCS to 2, keeps the worker count from the
// budget of 1, logs the raise, and Close restores 1.
func TestReserveKeepsAPFreeAtGOMAXPROCS1(t *testing.T) {
	setProcs(t, 1)
	var log bytes.Buffer
	s, err := New(WithIsolation(IsolationReserve), WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Workers(); got != 1 {
		t.Errorf("Workers = %d, want 1 (the budget, GOMAXPROCS 1)", got)
	}
	checkProcs(t, "while open", 2)
	if err := s.Run(context.Background(), emptyTask); err != nil {
		t.Errorf("Run: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkProcs(t, "after Close", 1)
	for _, want := range []string{"raised GOMAXPROCS", "GOMAXPROCS restored"} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log %q lacks %q", log.String(), want)
		}
	}
}

// TestReserveGOMAXPROCS: IsolationReserve raises GOMAXPROCS to its worker
// count plus one only where its workers are not fewer than GOMAXPROCS
// (GOMAXPROCS 1, WithWorkers at or above it, the fallback from
// IsolationOSPriority at 1), and leaves it alone elsewhere.
func TestReserveGOMAXPROCS(t *testing.T) {
	denied := withOS(func() error { return errors.New("setpriority: operation not permitted") }, nil, nil)
	tests := []struct {
		name          string
		procs         int
		opts          []Option
		workers, open int
	}{
		{"GOMAXPROCS 1: raised", 1, nil, 1, 2},
		{"GOMAXPROCS 2: a P free already", 2, nil, 1, 2},
		{"GOMAXPROCS 3: a P free already", 3, nil, 2, 3},
		{"GOMAXPROCS 8: two Ps free already", 8, nil, 6, 8},
		{"WithWorkers(2) at GOMAXPROCS 2: raised", 2, []Option{WithWorkers(2)}, 2, 3},
		{"WithWorkers(5) at GOMAXPROCS 2: raised", 2, []Option{WithWorkers(5)}, 5, 6},
		{"WithWorkers(1) at GOMAXPROCS 2: a P free already", 2, []Option{WithWorkers(1)}, 1, 2},
		{"the fallback from ospriority at GOMAXPROCS 1: raised", 1, []Option{WithIsolation(IsolationOSPriority), denied}, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setProcs(t, tt.procs)
			s, err := New(append([]Option{WithIsolation(IsolationReserve)}, tt.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Isolation != IsolationReserve || st.Workers != tt.workers {
				t.Errorf("%v with %d workers, want reserve with %d", st.Isolation, st.Workers, tt.workers)
			}
			checkProcs(t, "while open", tt.open)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			checkProcs(t, "after Close", tt.procs)
		})
	}
}

// TestReserveSchedulersShareGOMAXPROCS: two IsolationReserve Schedulers
// open at once at GOMAXPROCS 1 share one raise. The second takes its
// worker count from the budget (1), not the raised GOMAXPROCS (2), and
// GOMAXPROCS stays 2 until the last one closes.
func TestReserveSchedulersShareGOMAXPROCS(t *testing.T) {
	setProcs(t, 1)
	a, err := New(WithIsolation(IsolationReserve))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(WithIsolation(IsolationReserve))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Workers(); got != 1 {
		t.Errorf("the second Scheduler's Workers = %d, want 1 (the budget, not the raised GOMAXPROCS)", got)
	}
	checkProcs(t, "with both open", 2)
	a.Close(context.Background())
	checkProcs(t, "with one closed", 2)
	b.Close(context.Background())
	checkProcs(t, "after both closed", 1)
}

// TestReserveBesideOSPriorityShareGOMAXPROCS: at GOMAXPROCS 1, an
// IsolationReserve and an IsolationOSPriority Scheduler share the raise,
// whichever opens or closes first: GOMAXPROCS follows the most either
// wants (2; 4 for an ospriority one with 3 workers), and the last Close
// restores 1.
func TestReserveBesideOSPriorityShareGOMAXPROCS(t *testing.T) {
	if !osprio.Supported() || probeOSPriority() != nil {
		t.Skip("no thread priorities here")
	}
	reserve := []Option{WithIsolation(IsolationReserve)}
	tests := []struct {
		name          string
		ospriority    []Option
		reserveFirst  bool
		both, oneLeft int // GOMAXPROCS with both open, with the second closed
	}{
		{"reserve opened first, closed last", []Option{WithIsolation(IsolationOSPriority)}, true, 2, 2},
		{"ospriority opened first, closed last", []Option{WithIsolation(IsolationOSPriority)}, false, 2, 2},
		{"ospriority with 3 workers, closed first", []Option{WithIsolation(IsolationOSPriority), WithWorkers(3)}, true, 4, 2},
		{"ospriority with 3 workers, closed last", []Option{WithIsolation(IsolationOSPriority), WithWorkers(3)}, false, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setProcs(t, 1)
			first, second := reserve, tt.ospriority
			if !tt.reserveFirst {
				first, second = second, first
			}
			a, err := New(first...)
			if err != nil {
				t.Fatal(err)
			}
			b, err := New(second...)
			if err != nil {
				t.Fatal(err)
			}
			checkProcs(t, "with both open", tt.both)
			b.Close(context.Background())
			checkProcs(t, "with the first left open", tt.oneLeft)
			a.Close(context.Background())
			checkProcs(t, "after both closed", 1)
		})
	}
}
