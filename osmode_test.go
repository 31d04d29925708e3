package cpusched

import (
	"context"
	"errors"
	"os"
	"runtime"
	"testing"

	"github.com/cpusched/cpusched/internal/osprio"
)

func threadCount(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Skip("no /proc/self/task")
	}
	return len(entries)
}

func TestOSPriorityFallback(t *testing.T) {
	saved := probeOSPriority
	probeOSPriority = func(osprio.Policy) error { return errors.New("setpriority: operation not permitted") }
	defer func() { probeOSPriority = saved }()
	procsBefore := runtime.GOMAXPROCS(0)
	s, err := New(WithIsolation(IsolationOSPriority))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	st := s.Stats()
	if st.Isolation != IsolationReserve {
		t.Errorf("Isolation in effect = %v, want the reserve fallback", st.Isolation)
	}
	if st.Workers != ReserveWorkers(procsBefore) {
		t.Errorf("Workers = %d, want %d", st.Workers, ReserveWorkers(procsBefore))
	}
	if got := runtime.GOMAXPROCS(0); got != procsBefore {
		t.Errorf("GOMAXPROCS = %d, want it untouched (%d)", got, procsBefore)
	}
	if err := s.Run(context.Background(), func(*Task) error { return nil }); err != nil {
		t.Error(err)
	}
}

func TestTwoOSPrioritySchedulersShareGOMAXPROCS(t *testing.T) {
	if !osprio.Supported() {
		t.Skip("no per-thread priorities on this platform")
	}
	before := runtime.GOMAXPROCS(0)
	a, _ := New(WithIsolation(IsolationOSPriority))
	b, _ := New(WithIsolation(IsolationOSPriority), WithWorkers(4))
	if got := runtime.GOMAXPROCS(0); got < 4+spareProcs {
		t.Errorf("GOMAXPROCS = %d with a 4-worker scheduler, want >= %d", got, 4+spareProcs)
	}
	a.Close(context.Background())
	if got := runtime.GOMAXPROCS(0); got == before && before < 4+spareProcs {
		t.Errorf("GOMAXPROCS restored while another scheduler still needs it")
	}
	b.Close(context.Background())
	if got := runtime.GOMAXPROCS(0); got != before {
		t.Errorf("GOMAXPROCS after both closed = %d, want %d", got, before)
	}
}
