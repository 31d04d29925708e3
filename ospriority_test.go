package cpusched

// IsolationOSPriority on every platform (ospriority.go, procs.go): New's
// fallback and probes, the worker count under a cgroup limit, GOMAXPROCS
// shared by two Schedulers, and the lane's measure of own tasks.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

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
	denied := withOS(func() error { return errors.New("setpriority: operation not permitted") }, nil, nil)
	procsBefore := runtime.GOMAXPROCS(0)
	s, err := New(WithIsolation(IsolationOSPriority), denied)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	st := s.Stats()
	if st.Isolation != IsolationReserve {
		t.Errorf("Isolation in effect = %v, want the reserve fallback", st.Isolation)
	}
	if st.Workers != reserveWorkers(procsBefore) {
		t.Errorf("Workers = %d, want %d", st.Workers, reserveWorkers(procsBefore))
	}
	// Untouched from GOMAXPROCS 2 up; at 1, raised as reserve raises it.
	if got, want := runtime.GOMAXPROCS(0), max(procsBefore, st.Workers+spareProcs); got != want {
		t.Errorf("GOMAXPROCS = %d, want %d (was %d)", got, want, procsBefore)
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

func TestQuotaWorkers(t *testing.T) {
	tests := []struct {
		name            string
		procs, numCPU   int
		limit           float64
		limited, envSet bool
		want            int
	}{
		{"no limit", 2, 2, 0, false, false, 2},
		{"1.5 on 2 CPUs", 2, 2, 1.5, true, false, 1},
		{"1.0 on 2 CPUs: GOMAXPROCS is 2, never 1", 2, 2, 1.0, true, false, 1},
		{"0.5 on 64 CPUs", 2, 64, 0.5, true, false, 1},
		{"4 on 64 CPUs", 4, 64, 4, true, false, 3},
		{"3.2 on 64 CPUs", 4, 64, 3.2, true, false, 3},
		{"the limit is the whole machine", 2, 2, 2, true, false, 2},
		{"a limit above the CPU count", 2, 2, 8, true, false, 2},
		{"the operator set GOMAXPROCS", 2, 2, 1.5, true, true, 2},
		{"the program set its own GOMAXPROCS", 8, 64, 4, true, false, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quotaWorkers(tt.procs, tt.numCPU, tt.limit, tt.limited, tt.envSet); got != tt.want {
				t.Errorf("quotaWorkers(procs %d, numCPU %d, limit %v, %v, env %v) = %d, want %d",
					tt.procs, tt.numCPU, tt.limit, tt.limited, tt.envSet, got, tt.want)
			}
		})
	}
}

// TestOSPriorityWorkersFollowTheCgroupLimit checks New's use of the limit
// it reads: one worker fewer than the limit rounded up, every other mode and
// WithWorkers unchanged, and a limit that cannot be read ignored (and
// logged).
func TestOSPriorityWorkersFollowTheCgroupLimit(t *testing.T) {
	if err := probeOSPriority(); err != nil {
		t.Skipf("thread priorities cannot be lowered here: %v", err)
	}
	if os.Getenv("GOMAXPROCS") != "" || runtime.NumCPU() != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Skip("needs 2 CPUs with GOMAXPROCS the default 2")
	}
	var limit func() (float64, bool, error)
	open := func(t *testing.T, opts ...Option) int {
		t.Helper()
		s, err := New(append(opts, withOS(nil, nil, limit))...)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close(context.Background())
		return s.Workers()
	}

	limit = func() (float64, bool, error) { return 1.5, true, nil }
	if got := open(t, WithIsolation(IsolationOSPriority)); got != 1 {
		t.Errorf("OSPriority under a 1.5 limit: %d workers, want 1", got)
	}
	if got := open(t, WithIsolation(IsolationOSPriority), WithWorkers(2)); got != 2 {
		t.Errorf("OSPriority with WithWorkers(2) under a limit: %d workers, want 2", got)
	}
	if got := open(t, WithIsolation(IsolationNone)); got != 2 {
		t.Errorf("None under a limit: %d workers, want 2", got)
	}

	limit = func() (float64, bool, error) { return 0, false, errors.New("cpu.max: bad") }
	if got := open(t, WithIsolation(IsolationOSPriority)); got != 2 {
		t.Errorf("OSPriority when the limit cannot be read: %d workers, want 2", got)
	}
}

// testMode is an isolation mode to run a test in, with the options that
// select it.
type testMode struct {
	name string
	opts []Option
}

// testModes are every isolation mode, plus IsolationOSPriority handing its
// tasks to hand-off threads (withOSHandoff), as it does where a lowered
// thread cannot be raised back.
func testModes() []testMode {
	var modes []testMode
	for _, m := range IsolationModes() {
		modes = append(modes, testMode{m.String(), []Option{WithIsolation(m)}})
	}
	return append(modes, testMode{"ospriority-handoff", []Option{WithIsolation(IsolationOSPriority), withOSHandoff()}})
}

// TestSetCPUOfOwnTasks: the lane measures a task on its own goroutine
// whose thread is not lowered by its slot time less the time it did not
// compute, and at most osLowerAfter (its thread would be lowered past
// that), also where its thread's clock was read (for the charge); other
// tasks without a CPU reading, by their slot time.
func TestSetCPUOfOwnTasks(t *testing.T) {
	own := &Scheduler{os: &osMode{own: true}}
	ms := int64(time.Millisecond)
	for _, c := range []struct {
		name       string
		task       *Task
		kept, slot int64
		want       int64
	}{
		{"own, long slot time", &Task{s: own}, ms / 10, 5 * ms, int64(osLowerAfter)},
		{"own, short", &Task{s: own}, ms / 10, ms / 5, ms / 10},
		{"own, all kept", &Task{s: own}, ms, ms / 2, 0},
		{"handed off", &Task{s: own, os: osTask{handoff: true}}, 0, 5 * ms, 5 * ms},
		{"other modes", &Task{s: &Scheduler{}}, 0, 5 * ms, 5 * ms},
	} {
		c.task.os.uncomputed.Store(c.kept)
		c.task.runTime = c.slot
		c.task.setCPU(-1, c.slot)
		if got := c.task.laneCPU(); got != c.want {
			t.Errorf("%s: lane's measure %d, want %d", c.name, got, c.want)
		}
		if c.task.cpuUsed >= 0 {
			t.Errorf("%s: cpuUsed %d marks the next stretch as measured without a reading", c.name, c.task.cpuUsed)
		}
	}
	tk := &Task{s: own, runTime: 5 * ms}
	tk.setCPU(3*ms, 5*ms)
	if tk.cpuUsed != 3*ms {
		t.Errorf("with a CPU reading: cpuUsed %d, want %d", tk.cpuUsed, 3*ms)
	}
	if got := tk.laneCPU(); got != int64(osLowerAfter) {
		t.Errorf("own, with a CPU reading before its thread is lowered: lane's measure %d, want %d (the reading is the charge's)", got, int64(osLowerAfter))
	}
	tk.os.lowered.Store(true)
	if got := tk.laneCPU(); got != 3*ms {
		t.Errorf("own, lowered: lane's measure %d, want the reading %d", got, 3*ms)
	}
	ho := &Task{s: own, os: osTask{handoff: true}}
	ho.setCPU(3*ms, 5*ms)
	ho.setCPU(cpuUnread, 6*ms)
	if ho.laneCPU() != 3*ms || ho.cpuUsed >= 0 {
		t.Errorf("handed off, without a reading: cpuUsed %d (lane's measure %d), want the measure kept (%d) and marked not measured", ho.cpuUsed, ho.laneCPU(), 3*ms)
	}
}

// TestOSPriorityHandsOffWhereThreadsCannotBeRaised: where a lowered
// thread cannot be raised back (no CAP_SYS_NICE, an RLIMIT_NICE that does
// not allow it), IsolationOSPriority hands every task to a hand-off
// thread, and says why in its log.
func TestOSPriorityHandsOffWhereThreadsCannotBeRaised(t *testing.T) {
	if !osprio.Supported() || probeOSPriority() != nil {
		t.Skip("no thread priorities here")
	}
	var buf bytes.Buffer
	noRaise := withOS(nil, func() error { return errors.New("setpriority: permission denied") }, nil)
	s, err := New(WithIsolation(IsolationOSPriority), noRaise, WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if s.osOwn() {
		t.Errorf("tasks may run on their own goroutines; want every task handed off")
	}
	if !s.os.dispatch(&Task{}) {
		t.Errorf("dispatch did not hand a task off")
	}
	if want := "cannot be raised back"; !strings.Contains(buf.String(), want) {
		t.Errorf("log %q lacks %q", buf.String(), want)
	}
	if err := s.Run(context.Background(), emptyTask); err != nil {
		t.Errorf("Run: %v", err)
	}
}

func TestOneCPU(t *testing.T) {
	for _, c := range []struct {
		capacity float64
		numCPU   int
		limit    float64
		want     bool
	}{
		{1, 1, 0, true},     // a one-CPU cpuset or mask
		{1, 4, 1, true},     // a 1-CPU cgroup limit on 4 CPUs
		{0.5, 4, 0.5, true}, // half a CPU
		{1, 2, 0, false},    // GOMAXPROCS=1 set on 2 CPUs
		{1.5, 2, 1.5, false},
		{2, 2, 0, false},
	} {
		if got := oneCPU(c.capacity, c.numCPU, c.limit); got != c.want {
			t.Errorf("oneCPU(%v, %d, %v) = %v, want %v", c.capacity, c.numCPU, c.limit, got, c.want)
		}
	}
}
