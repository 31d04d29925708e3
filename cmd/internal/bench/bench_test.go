package bench

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
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
	cfg.Modes = []string{AllModes()[len(AllModes())-1]}
	cfg.Step, cfg.Warmup, cfg.Settle = 300*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate = 100, 4, 50
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rep.Results) != len(Steps()) {
		t.Fatalf("got %d rows, want %d", len(rep.Results), len(Steps()))
	}
	finite := func(what string, v float64) {
		t.Helper()
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			t.Errorf("%s: got %v, want a finite number >= 0", what, v)
		}
	}
	for i, row := range rep.Results {
		if row.Mode != cfg.Modes[0] || row.Step != Steps()[i] {
			t.Errorf("row %d: got %s/%s, want %s/%s", i, row.Mode, row.Step, cfg.Modes[0], Steps()[i])
		}
		if row.Probe == nil || row.Probe.RPS <= 0 {
			t.Errorf("row %d: got probe %+v, want requests completed", i, row.Probe)
			continue
		}
		for _, v := range []float64{row.Probe.P50Ms, row.Probe.P99Ms, row.Probe.P999Ms, row.Probe.MaxMs} {
			finite(row.Step+" probe latency", v)
		}
		if row.Probe.Errors != 0 {
			t.Errorf("row %d: got %d probe errors, want 0", i, row.Probe.Errors)
		}
		if (row.Hog != nil) != (row.Step != StepIdle) {
			t.Errorf("row %d: got hog %+v, want present only under load", i, row.Hog)
		}
		if row.Hog != nil {
			finite(row.Step+" passes/s", row.Hog.PassesPerS)
		}
		if (row.Small != nil) != (row.Step == StepHogSchedSm) {
			t.Errorf("row %d: got small %+v, want present only in %s", i, row.Small, StepHogSchedSm)
		}
		if (row.SmallDirect != nil) != (row.Step == StepHogSchedSm) {
			t.Errorf("row %d: got small_direct %+v, want present only in %s", i, row.SmallDirect, StepHogSchedSm)
		}
		if row.Small != nil && (row.Small.WaitedP99Ms == nil || row.Small.RPS <= 0 || row.SmallDirect.RPS <= 0) {
			t.Errorf("row %d: small %+v, small_direct %+v: want both answered and the scheduled ones' Task.Waited read", i, row.Small, row.SmallDirect)
		}
		if row.GCStopMaxMs == nil {
			t.Errorf("row %d: got no gc_stop_max_ms, want the server's figure", i)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", buf.String())
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
	cfg.Modes = []string{AllModes()[0]}
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
	// No server left behind: no process of ours runs the binary.
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

// childrenRunning returns the pids of this process's children whose
// command line starts with exe.
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
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.HasPrefix(cmdline, []byte(exe+"\x00")) {
			continue
		}
		if alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestRunWithTrace: with TraceDir, the two scheduled-load steps record a
// trace whose probe requests are matched to the client's latencies, and
// their rows name the attribution file. TraceAbove at its minimum makes
// every matched request slow, which the default threshold would not.
func TestRunWithTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.Modes = []string{AllModes()[len(AllModes())-1]}
	cfg.Step, cfg.Warmup, cfg.Settle = 500*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate = 100, 4, 50
	cfg.TraceDir = filepath.Join(t.TempDir(), "traces")
	cfg.TraceAbove = MinTraceAbove
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, row := range rep.Results {
		traced := row.Step == StepHogSched || row.Step == StepHogSchedSm
		if (row.Attribution != "") != traced {
			t.Errorf("%s: attribution %q, want one only for %s and %s", row.Step, row.Attribution, StepHogSched, StepHogSchedSm)
		}
		if !traced || row.Attribution == "" {
			continue
		}
		text, err := os.ReadFile(row.Attribution)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(strings.TrimSuffix(row.Attribution, ".txt") + ".trace"); err != nil {
			t.Errorf("%s: %v", row.Step, err)
		}
		if !bytes.HasPrefix(text, []byte("slow: client latency above 0.001 ms (-trace-above)\n")) {
			t.Errorf("%s: the breakdown does not begin with the -trace-above threshold:\n%s", row.Step, text)
		}
		var secs, above float64
		var probes, matched, followed, slow int
		line := string(text[max(0, bytes.Index(text, []byte("trace: "))):])
		if _, err := fmt.Sscanf(line, "trace: %f s, %d probe requests traced, %d matched to a client latency (%d followed), %d slower than %f ms",
			&secs, &probes, &matched, &followed, &slow, &above); err != nil {
			t.Fatalf("%s: cannot read the counts in %q: %v", row.Step, line, err)
		}
		if probes == 0 || matched != probes {
			t.Errorf("%s: %d probe requests traced, %d matched; want some, all matched", row.Step, probes, matched)
		}
		if slow != matched {
			t.Errorf("%s: %d of %d matched requests slower than %v ms; want all of them with TraceAbove %v", row.Step, slow, matched, above, MinTraceAbove)
		}
	}
}
