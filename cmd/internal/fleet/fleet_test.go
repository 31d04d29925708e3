package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// TestDrive drives two in-process replicas: every measured call is
// recorded, round robin splits them evenly, and the window opens before
// it closes.
func TestDrive(t *testing.T) {
	var addrs []string
	for range 2 {
		h, _, end := inProcessReplica(t)
		defer func() {
			if err := end(); err != nil {
				t.Errorf("a replica's error: %v", err)
			}
		}()
		addrs = append(addrs, h.Addr)
	}
	var events []bool
	rec, err := drive(context.Background(), driveSpec{
		addrs: addrs, policy: PolicyRoundRobin, rate: 100,
		warmup: 200 * time.Millisecond, duration: 500 * time.Millisecond, timeout: 5 * time.Second,
		window: func(start bool) { events = append(events, start) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || !events[0] || events[1] {
		t.Errorf("window events %v, want [true false]", events)
	}
	var calls int64
	for _, m := range rec.methods {
		calls += m.calls
		if m.errors != 0 {
			t.Errorf("%d errors", m.errors)
		}
	}
	if calls != 50 {
		t.Errorf("%d calls measured, want 50 (100/s over 0.5 s)", calls)
	}
	// Round robin alternates, but grpc-go's picker starts at a random
	// replica whenever it is rebuilt (a connection becoming ready late, on
	// a loaded machine), so one call may go twice to the same one.
	a, b := rec.replicas[0].calls, rec.replicas[1].calls
	if a+b != 50 || a < 24 || b < 24 {
		t.Errorf("round robin gave %d and %d calls, want 25 each, give or take one", a, b)
	}
	for i, r := range rec.replicas {
		if r.reports != r.calls {
			t.Errorf("replica %d: %d load reports from %d calls, want one per call", i, r.reports, r.calls)
		}
	}
}

// TestDriveCancelled: a cancelled run returns its context's error at once.
func TestDriveCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := drive(ctx, driveSpec{addrs: []string{"127.0.0.1:1"}, policy: PolicyWRR, rate: 10, duration: time.Second, timeout: time.Second,
		window: func(bool) {}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("drive with a cancelled context: %v", err)
	}
}

func testConfig(t *testing.T) Config {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(exe)
	cfg.Replicas, cfg.QuotaRate, cfg.BatchRate, cfg.NeighborRate = 2, 40, 40, 40
	cfg.Warmup, cfg.Duration, cfg.Timeout = 300*time.Millisecond, MinDuration, 5*time.Second
	cfg.Rounds, cfg.Arrivals = 1, ArrivalsFixed
	cfg.Policies = []string{PolicyRoundRobin}
	return cfg
}

// TestRunQuota runs the quota scenario's round-robin row for real, where
// this process may make cgroups: each replica's scheduler reads its
// limit, and no cgroup is left behind.
func TestRunQuota(t *testing.T) {
	rep := runWithQuotas(t, ScenarioQuota)
	if len(rep.Results) != 1 || rep.Cgroup == "" {
		t.Fatalf("results %+v, cgroup %q", rep.Results, rep.Cgroup)
	}
	got := rep.Results[0].Replicas
	if len(got) != 2 || got[0].CPULimit != DefaultWeakCPU || got[1].CPULimit != DefaultCPU {
		t.Errorf("replicas %+v: want the limits %v and %v", got, DefaultWeakCPU, DefaultCPU)
	}
	if got[0].ThrottledPct == nil || got[0].ThrottledMs == nil {
		t.Errorf("replica 0: throttled %v, %v ms: want its cgroup's accounting", got[0].ThrottledPct, got[0].ThrottledMs)
	}
	checkCgroupsRemoved(t, rep)
}

// TestRunNeighbor runs the neighbor scenario's round-robin row for real,
// where this process may make cgroups: the first replica's neighbour
// computes in its cgroup, the others have none, and no cgroup (which
// would hold the neighbour if it had outlived its replica) is left behind.
func TestRunNeighbor(t *testing.T) {
	rep := runWithQuotas(t, ScenarioNeighbor)
	if len(rep.Results) != 1 || rep.Results[0].Scenario != ScenarioNeighbor {
		t.Fatalf("results %+v", rep.Results)
	}
	got := rep.Results[0].Replicas
	if len(got) != 2 || !got[0].Neighbor || got[1].Neighbor || got[0].CPULimit != DefaultCPU || got[1].CPULimit != DefaultCPU {
		t.Errorf("replicas %+v: want the first with a neighbour, both limited to %v", got, DefaultCPU)
	}
	if got[0].NeighborPassesPerS <= 0 || got[1].NeighborPassesPerS != 0 {
		t.Errorf("neighbour passes/s %v and %v: want the first's above 0, the second's 0", got[0].NeighborPassesPerS, got[1].NeighborPassesPerS)
	}
	checkCgroupsRemoved(t, rep)
}

// runWithQuotas runs scenario's round-robin row of testConfig and returns
// its report; it skips the test where this process may not make cgroups.
func runWithQuotas(t *testing.T, scenario string) Report {
	t.Helper()
	if _, err := bench.OpenCPUQuotas(DefaultWeakCPU); err != nil {
		t.Skipf("no CPU quotas here: %v", err)
	}
	cfg := testConfig(t)
	cfg.Scenarios = []string{scenario}
	cfg.JSONPath = filepath.Join(t.TempDir(), "fleet.json")
	if err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	return readReport(t, cfg.JSONPath)
}

// checkCgroupsRemoved reports the cgroups of this process's run rep that
// are still there.
func checkCgroupsRemoved(t *testing.T, rep Report) {
	t.Helper()
	dir := rep.Cgroup[strings.LastIndexByte(rep.Cgroup, ' ')+1:] // "cgroup v1 /sys/fs/cgroup/cpu"
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "cpusched-bench-") && strings.Contains(e.Name(), "-"+strconv.Itoa(os.Getpid())+"-") {
			t.Errorf("cgroup %s left behind", filepath.Join(dir, e.Name()))
		}
	}
}

// TestRunInterrupted: a run whose context ends as its second round's
// second segment starts writes the rows of the first round only (both
// policies', one round each) and returns the context's error, leaving no
// replica running (goleak checks this process's side).
func TestRunInterrupted(t *testing.T) {
	cfg := testConfig(t)
	cfg.Scenarios = []string{ScenarioBatch}
	cfg.Policies = []string{PolicyRoundRobin, PolicyWRR}
	cfg.Rounds, cfg.Duration = 2, 2*MinDuration
	cfg.JSONPath = filepath.Join(t.TempDir(), "fleet.json")
	var out bytes.Buffer
	cfg.Stdout = &out
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg.Progress = report.ForceProgress(writerFunc(func(p []byte) {
		if bytes.Contains(p, []byte("segment 4 of 4")) {
			cancel()
		}
	}))
	err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want the context's cancellation", err)
	}
	rep := readReport(t, cfg.JSONPath)
	if len(rep.Results) != 2 {
		t.Fatalf("%d rows, want both policies' of the first round:\n%s", len(rep.Results), out.String())
	}
	for _, r := range rep.Results {
		if r.Rounds != 1 || r.Calls != 20 {
			t.Errorf("%s: %d rounds, %d calls; want 1 round of 20 calls (40/s over 0.5 s)", r.Policy, r.Rounds, r.Calls)
		}
	}
}

// readReport reads the JSON file of a run.
func readReport(t *testing.T, path string) Report {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// writerFunc is an io.Writer that hands each write to a function.
type writerFunc func(p []byte)

func (f writerFunc) Write(p []byte) (int, error) {
	f(p)
	return len(p), nil
}

// TestRunNothingToRun: the quota and neighbor scenarios alone, where they
// cannot run, are ErrNothingToRun before anything starts.
func TestRunNothingToRun(t *testing.T) {
	if _, err := bench.OpenCPUQuotas(DefaultWeakCPU); err == nil {
		t.Skip("CPU quotas work here")
	}
	cfg := testConfig(t)
	cfg.Scenarios = []string{ScenarioQuota, ScenarioNeighbor}
	if err := Run(context.Background(), cfg); !errors.Is(err, ErrNothingToRun) {
		t.Fatalf("Run: %v, want ErrNothingToRun", err)
	}
}
