package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// cpuschedBin is the cpusched binary TestMain builds for the end-to-end
// test ("" under -short), and buildErr why that failed.
var (
	cpuschedBin string
	buildErr    error
)

func TestMain(m *testing.M) {
	if os.Getenv(cgroupChildEnv) != "" {
		runCgroupChild() // TestChildSeesCPUQuota's child; exits
	}
	if os.Getenv(neighborChildEnv) != "" {
		runNeighborChild() // the neighbour of the neighbour tests; exits
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if !testing.Short() {
		cpuschedBin = filepath.Join(dir, "cpusched")
		cmd := exec.Command("go", "build", "-o", cpuschedBin, "./cpusched")
		cmd.Dir = filepath.Join("..", "..") // the cmd module
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/cpusched: %v\n%s", err, out)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestRunEndToEnd runs a very short bench of the floor and the default
// mode: every step's row has its loads' figures, io-heavy's probe is a
// closed loop, and the JSON has the ratios to the floor.
func TestRunEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if out, _ := exec.Command(cpuschedBin, "help").CombinedOutput(); !bytes.Contains(out, []byte("serve ")) {
		t.Skipf("this cpusched has no serve command yet:\n%s", out)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	mode := AllModes()[len(AllModes())-1]
	cfg.Modes = []string{ModeFloor, mode}
	cfg.Step, cfg.Warmup, cfg.Settle = 300*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate, cfg.IOConcurrency = 100, 4, 50, 4
	cfg.NeighborConcurrency = 1
	defer func(start func(context.Context, Config, *launcher, *cpuCgroup) (*hogproc.Process, error)) {
		startNeighbor = start
	}(startNeighbor)
	starts, start := 0, startNeighbor
	startNeighbor = func(ctx context.Context, cfg Config, l *launcher, cg *cpuCgroup) (*hogproc.Process, error) {
		starts++
		return start(ctx, cfg, l, cg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if starts != len(cfg.Modes) {
		t.Errorf("got the neighbour started %d times, want once per mode (%d)", starts, len(cfg.Modes))
	}
	if len(rep.Skipped) > 0 {
		t.Fatalf("skipped %+v: this test wants a machine where SCHED_IDLE can be set", rep.Skipped)
	}
	var want []string
	for _, m := range cfg.Modes {
		for _, step := range StepsOf(m) {
			want = append(want, m+"/"+step)
		}
	}
	var got []string
	for _, row := range rep.Results {
		got = append(got, row.Mode+"/"+row.Step)
		checkRow(t, row)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got rows %v, want %v", got, want)
	}
	if len(rep.Servers) != 2 || !strings.Contains(rep.Servers[0], "threads SCHED_IDLE") {
		t.Errorf("servers: got %q, want the floor's hog's threads checked", rep.Servers)
	}
	checkFloorJSON(t, rep, mode)
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "x the floor") {
		t.Errorf("the table's summary lines have no ratio to the floor:\n%s", buf.String())
	}
	t.Logf("\n%s", buf.String())
}

// checkRow checks that a row measured by Run has the figures of its
// step's loads, and only those.
func checkRow(t *testing.T, row Result) {
	t.Helper()
	finite := func(what string, v float64) {
		t.Helper()
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("%s/%s %s: got %v, want a finite number >= 0", row.Mode, row.Step, what, v)
		}
	}
	name := row.Mode + "/" + row.Step
	if row.Probe == nil || row.Probe.RPS <= 0 {
		t.Errorf("%s: got probe %+v, want requests completed", name, row.Probe)
		return
	}
	for _, v := range []float64{row.Probe.P50Ms, row.Probe.P99Ms, row.Probe.P999Ms, row.Probe.MaxMs} {
		finite("probe latency", v)
	}
	if row.Probe.Errors != 0 {
		t.Errorf("%s: got %d probe errors, want 0", name, row.Probe.Errors)
	}
	if closed := row.Step == StepIOHeavy; row.Probe.ClosedLoop != closed || closed && row.Probe.Connections != 4 {
		t.Errorf("%s: got closed loop %v with %d connections, want closed loop (4 connections) only in io-heavy", name, row.Probe.ClosedLoop, row.Probe.Connections)
	}
	if (row.Hog != nil) != (row.Step != StepIdle && row.Step != StepNeighborAlone) {
		t.Errorf("%s: got hog %+v, want present only under load", name, row.Hog)
	}
	if row.Hog != nil {
		finite("passes/s", row.Hog.PassesPerS)
		if row.Hog.FloorHog != (row.Mode == ModeFloor) || row.Hog.PassesPerS <= 0 {
			t.Errorf("%s: got hog %+v, want passes done, by the floor's hog in the floor", name, row.Hog)
		}
	}
	// Auto finds /checksum heavy by its CPU: with Linux's thread CPU
	// clocks, which the floor's SCHED_IDLE needs too.
	if a := row.Auto; (a != nil) != (row.Step == StepAuto) || a != nil && (!a.Heavy || a.Route != autoRoute || a.PrimeRequests < 1) {
		t.Errorf("%s: got auto %+v, want %s heavy over the window, only in %s", name, a, autoRoute, StepAuto)
	}
	withSmall := row.Step == StepHogSchedSm || row.Step == StepNeighbor || row.Step == StepNeighborNoCkpt
	if (row.Small != nil) != (withSmall && row.Mode != ModeFloor) {
		t.Errorf("%s: got small %+v, want present only in %s and %s, not in the floor", name, row.Small, StepHogSchedSm, StepNeighbor)
	}
	if (row.SmallDirect != nil) != withSmall {
		t.Errorf("%s: got small_direct %+v, want present only in %s and %s", name, row.SmallDirect, StepHogSchedSm, StepNeighbor)
	}
	if n := row.Neighbor; (n != nil) != withNeighbor(row.Step) || n != nil && (!(n.PassesPerS > 0) || n.Threads != 1) {
		t.Errorf("%s: got neighbor %+v, want its passes (1 thread) only beside it", name, n)
	}
	if row.Small != nil && (row.Small.WaitedP99Ms == nil || row.Small.RPS <= 0 || row.SmallDirect.RPS <= 0) {
		t.Errorf("%s: small %+v, small_direct %+v: want both answered and the scheduled ones' Task.Waited read", name, row.Small, row.SmallDirect)
	}
	// Not max >= stopping: the runtime records a pause's stopping time
	// before the world restarts and its total after (startTheWorldWithSema),
	// so where the thread that stopped it is slow to run on (a lowered task
	// thread, a busy machine: seen unprivileged, 67 ms of stopping beside a
	// 2.6 ms longest total), the total can land in the next window.
	if g := row.GC; g == nil || g.Pauses > 0 && !(g.PauseMaxMs > 0 && g.PauseMaxMs >= g.PauseP99Ms) {
		t.Errorf("%s: got gc %+v, want the window's pauses, max >= p99", name, g)
	}
}

// checkFloorJSON checks the JSON of a run of the floor and mode: every
// row of mode whose step has a floor counterpart carries its ratios, which
// are the p99s' and the rates' in the same document.
func checkFloorJSON(t *testing.T, rep *Report, mode string) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	type probe struct {
		P99Ms      float64 `json:"p99_ms"`
		RPS        float64 `json:"rps"`
		ClosedLoop bool    `json:"closed_loop"`
	}
	var doc struct {
		Config struct {
			IOConcurrency int    `json:"io_concurrency"`
			IOPath        string `json:"io_path"`
		} `json:"config"`
		Results []struct {
			Mode, Step string
			Probe      probe `json:"probe"`
			Hog        *struct {
				PctOfDirect *float64 `json:"pct_of_direct"`
				DirectRef   string   `json:"direct_ref"`
			} `json:"hog"`
			VsFloor *struct {
				Step   string  `json:"floor_step"`
				P99X   float64 `json:"p99_x"`
				RPSPct float64 `json:"rps_pct"`
			} `json:"vs_floor"`
		} `json:"results"`
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Config.IOConcurrency != 4 || doc.Config.IOPath != pathIO {
		t.Errorf("config: got io_concurrency %d, io_path %q; want 4, %q", doc.Config.IOConcurrency, doc.Config.IOPath, pathIO)
	}
	floor := map[string]probe{}
	for _, r := range doc.Results {
		if r.Mode == ModeFloor {
			floor[r.Step] = r.Probe
			if r.Hog != nil && (r.Hog.PctOfDirect == nil || r.Hog.DirectRef != mode+"/"+StepHogDirect) {
				t.Errorf("floor/%s: got hog %+v, want a share of %s/%s", r.Step, r.Hog, mode, StepHogDirect)
			}
		}
	}
	for _, r := range doc.Results {
		fs := floorStepOf(r.Step)
		if r.Mode == ModeFloor || fs == "" {
			if r.VsFloor != nil {
				t.Errorf("%s/%s: got vs_floor %+v, want null", r.Mode, r.Step, r.VsFloor)
			}
			continue
		}
		f, v := floor[fs], r.VsFloor
		if v == nil || v.Step != fs || math.Abs(v.P99X-r.Probe.P99Ms/f.P99Ms) > 1e-9 || math.Abs(v.RPSPct-r.Probe.RPS/f.RPS*100) > 1e-9 {
			t.Errorf("%s/%s: got vs_floor %+v, want the floor's %s: p99 %v/%v, rps %v/%v", r.Mode, r.Step, v, fs, r.Probe.P99Ms, f.P99Ms, r.Probe.RPS, f.RPS)
		}
	}
}

// TestRunSkipsFloorWithoutSchedIdle: where the hog's threads cannot be
// made SCHED_IDLE, Run skips the floor, says why, and starts no server
// for it.
func TestRunSkipsFloorWithoutSchedIdle(t *testing.T) {
	defer func(start func(context.Context, Config, *launcher, *cpuCgroup) (*hogproc.Process, error)) {
		startIdleHog = start
	}(startIdleHog)
	startIdleHog = func(context.Context, Config, *launcher, *cpuCgroup) (*hogproc.Process, error) {
		return nil, fmt.Errorf("%w: thread 42: sched_setattr(SCHED_IDLE): operation not permitted", hogproc.ErrNoSchedIdle)
	}
	cfg := DefaultConfig(filepath.Join(t.TempDir(), "no-such-cpusched"), "serve")
	cfg.Modes = []string{ModeFloor}
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Run: %v, want the floor skipped without an error", err)
	}
	want := []Skipped{{Mode: ModeFloor, Reason: "the hog's threads cannot be made SCHED_IDLE here: thread 42: sched_setattr(SCHED_IDLE): operation not permitted"}}
	if len(rep.Results) != 0 || !reflect.DeepEqual(rep.Skipped, want) {
		t.Errorf("got results %v, skipped %+v; want none and %+v", rep.Results, rep.Skipped, want)
	}
}

func TestRunCancelledStopsServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	if out, _ := exec.Command(cpuschedBin, "help").CombinedOutput(); !bytes.Contains(out, []byte("serve ")) {
		t.Skipf("this cpusched has no serve command yet:\n%s", out)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	// The floor first, so that its hog process must be stopped too (the
	// next mode's server, where the floor is skipped).
	cfg.Modes = []string{ModeFloor, AllModes()[1]}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := Run(ctx, cfg) // 7 s steps: the deadline hits in the first one
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got error %v, want context.DeadlineExceeded", err)
	}
	if rep == nil {
		t.Fatal("got nil report, want the (empty) partial one")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %v after cancellation, want it to return promptly (limit 10s)", took)
	}
	// No server or hog left behind: no process of ours runs the binary.
	if pids := childrenRunning(t, cpuschedBin); len(pids) > 0 {
		t.Errorf("got server processes %v still running, want none", pids)
	}
}

// TestRunWithDoneContextStartsNothing: a context that has ended before Run
// starts no server (a server binary that does not exist would fail to
// start) and returns the context's error with an empty report.
func TestRunWithDoneContextStartsNothing(t *testing.T) {
	cfg := DefaultConfig(filepath.Join(t.TempDir(), "no-such-cpusched"), "serve")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rep, err := Run(ctx, cfg)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got error %v, want context.Canceled", err)
	}
	if rep == nil || len(rep.Results) != 0 {
		t.Errorf("got report %+v, want an empty one", rep)
	}
}

// childrenRunning returns the pids of this process's children that run a
// program of exe's name: exe, or its copy for uid 65534 (launch.go).
func childrenRunning(t *testing.T, exe string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err1 := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, err2 := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err1 != nil || err2 != nil {
			continue
		}
		argv0, _, _ := bytes.Cut(cmdline, []byte{0})
		// "pid (comm) state ppid ...": the fields after the last ')'.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if filepath.Base(string(argv0)) != filepath.Base(exe) || len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}
