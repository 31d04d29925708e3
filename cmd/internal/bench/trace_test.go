package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTracedSleeps: the sleeps the attribution assumes are the ones the
// probe's and io-heavy's paths ask the demo server for.
func TestTracedSleeps(t *testing.T) {
	u, err := url.Parse(pathIO)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := time.ParseDuration(u.Query().Get("d")); err != nil || d != ioSleep {
		t.Errorf("%s sleeps %v (%v), ioSleep is %v", pathIO, d, err, ioSleep)
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(pathProbe, "/delay")); err != nil || d != probeSleep {
		t.Errorf("%s sleeps %v (%v), probeSleep is %v", pathProbe, d, err, probeSleep)
	}
}

func TestTracedStep(t *testing.T) {
	for _, step := range StepNames() {
		want := step != StepIdle && step != StepHogDirect
		if got := tracedStep(step); got != want {
			t.Errorf("tracedStep(%s) = %v, want %v", step, got, want)
		}
	}
}

// TestThreshold: -trace-above overrides every step; the probe's steps take
// twice the idle p99; io-heavy takes twice the floor's io-heavy p99, the
// floor's own step's in the floor, and the step's own p99 with no floor
// measured before.
func TestThreshold(t *testing.T) {
	m := &meter{idleP99: 2, floorIOP99: 5, spec: "ospriority"}
	floor := &meter{idleP99: 2, spec: ModeFloor}
	noFloor := &meter{idleP99: 2, spec: "ospriority"}
	noIdle := &meter{floorIOP99: 5, spec: "ospriority"} // -steps without idle
	above := &meter{idleP99: 2, floorIOP99: 5, spec: "ospriority", cfg: Config{TraceAbove: 3 * time.Millisecond}}
	for _, c := range []struct {
		m    *meter
		step string
		want float64
		why  string
	}{
		{m, StepHogSched, 4, "twice the idle step's p99"},
		{m, StepHogSchedSm, 4, "twice the idle step's p99"},
		{m, StepHogNoCkpt, 4, "twice the idle step's p99"},
		{m, StepIOHeavy, 10, "twice the floor's io-heavy p99 in this run"},
		{floor, StepIOHeavy, 14, "twice the floor's io-heavy p99, this step's"},
		{floor, StepHogSched, 4, "twice the idle step's p99"},
		{noFloor, StepIOHeavy, 7, "this step's own p99: no floor measured before this mode"},
		{above, StepIOHeavy, 3, "-trace-above"},
		{above, StepHogSched, 3, "-trace-above"},
		{m, StepNeighbor, 4, "twice the idle step's p99"},
		{floor, StepNeighborAlone, 4, "twice the idle step's p99"},
		{noIdle, StepNeighbor, 7, "this step's own p99: the idle step was not measured (-steps)"},
		{noIdle, StepIOHeavy, 10, "twice the floor's io-heavy p99 in this run"},
	} {
		got, why := c.m.threshold(c.step, 7)
		if got != c.want || why != c.why {
			t.Errorf("%s %s: threshold %v (%s), want %v (%s)", c.m.spec, c.step, got, why, c.want, c.why)
		}
	}
}

func TestIOHeavyP99(t *testing.T) {
	rows := []Result{{Step: StepIdle, Probe: &ProbeResult{P99Ms: 1}}, {Step: StepIOHeavy, Probe: &ProbeResult{P99Ms: 6}}}
	if got := ioHeavyP99(rows); got != 6 {
		t.Errorf("ioHeavyP99 = %v, want 6", got)
	}
	if got := ioHeavyP99(rows[:1]); got != 0 {
		t.Errorf("ioHeavyP99 with no io-heavy row = %v, want 0", got)
	}
}

// traceCounts are the counts an attribution file gives on its "trace:"
// line.
type traceCounts struct {
	secs, above                     float64
	traced, matched, followed, slow int
}

// readAttribution reads a row's attribution file, checks that its trace
// is beside it, and returns its text and counts.
func readAttribution(t *testing.T, row Result) (string, traceCounts) {
	t.Helper()
	text, err := os.ReadFile(row.Attribution)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(strings.TrimSuffix(row.Attribution, ".txt") + ".trace"); err != nil {
		t.Errorf("%s/%s: %v", row.Mode, row.Step, err)
	}
	var c traceCounts
	line := string(text[max(0, bytes.Index(text, []byte("trace: "))):])
	if _, err := fmt.Sscanf(line, "trace: %f s, %d probe requests traced, %d matched to a client latency (%d followed), %d slower than %f ms",
		&c.secs, &c.traced, &c.matched, &c.followed, &c.slow, &c.above); err != nil {
		t.Fatalf("%s/%s: cannot read the counts in %q: %v", row.Mode, row.Step, line, err)
	}
	return string(text), c
}

// checkMatched checks that a traced row's requests were matched to the
// client's latencies: all of them, but in io-heavy, whose closed loop
// stops at the window's end with up to a request per connection in
// flight, which the server may have answered in the trace.
func checkMatched(t *testing.T, cfg Config, row Result, c traceCounts) {
	t.Helper()
	unmatched := 0
	if row.Step == StepIOHeavy {
		unmatched = cfg.IOConcurrency
	}
	if c.traced == 0 || c.matched == 0 || c.matched < c.traced-unmatched || c.followed == 0 {
		t.Errorf("%s/%s: %d requests traced, %d matched, %d followed; want some, all matched but at most %d", row.Mode, row.Step, c.traced, c.matched, c.followed, unmatched)
	}
}

// traceRun runs the bench with cfg, every step short, with a trace
// directory, and returns the report.
func traceRun(t *testing.T, cfg Config) *Report {
	t.Helper()
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cfg.Step, cfg.Warmup, cfg.Settle = 500*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate, cfg.IOConcurrency = 100, 4, 50, 4
	cfg.TraceDir = filepath.Join(t.TempDir(), "traces")
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, row := range rep.Results {
		if (row.Attribution != "") != tracedStep(row.Step) {
			t.Errorf("%s/%s: attribution %q, want one only for %s, %s and %s", row.Mode, row.Step, row.Attribution, StepHogSched, StepHogSchedSm, StepIOHeavy)
		}
	}
	return rep
}

// TestRunWithTrace: with TraceDir, the two scheduled-load steps and
// io-heavy record a trace whose requests are matched to the client's
// latencies, and their rows name the attribution file. TraceAbove at its
// minimum makes every matched request slow, which the default threshold
// would not: so io-heavy's are attributed, as a closed loop with its sleep.
func TestRunWithTrace(t *testing.T) {
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.Modes = []string{AllModes()[len(AllModes())-1]}
	cfg.TraceAbove = MinTraceAbove
	rep := traceRun(t, cfg)
	for _, row := range rep.Results {
		if row.Attribution == "" {
			continue
		}
		text, c := readAttribution(t, row)
		if !strings.HasPrefix(text, "slow: client latency above 0.001 ms (-trace-above)\n") {
			t.Errorf("%s: the breakdown does not begin with the -trace-above threshold:\n%s", row.Step, text)
		}
		checkMatched(t, cfg, row, c)
		if c.slow != c.matched {
			t.Errorf("%s: %d of %d matched requests slower than %v ms; want all of them with TraceAbove %v", row.Step, c.slow, c.matched, c.above, MinTraceAbove)
		}
		want := []string{"client: request sent after its due time", "the 1 ms sleep itself"}
		if row.Step == StepIOHeavy {
			want = []string{"closed loop: each latency counts from the request's send\n", "client: before the request was sent (closed loop)", "the 500 us sleep itself"}
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the breakdown lacks %q:\n%s", row.Step, w, text)
			}
		}
	}
}

// TestRunTracesIOHeavyAgainstTheFloor: without TraceAbove, io-heavy's slow
// requests are those above twice the floor's io-heavy p99 in the same run,
// in the floor and in the mode after it (without the floor, the mode's own
// p99), and the floor's io-heavy is traced too.
func TestRunTracesIOHeavyAgainstTheFloor(t *testing.T) {
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.Modes = []string{ModeFloor, AllModes()[len(AllModes())-1]}
	rep := traceRun(t, cfg)
	floorP99 := 0.0
	if len(rep.Skipped) == 0 {
		floorP99 = rep.find(ModeFloor, StepIOHeavy).Probe.P99Ms
	}
	seen := 0
	for _, row := range rep.Results {
		if row.Step != StepIOHeavy {
			continue
		}
		seen++
		text, c := readAttribution(t, row)
		want := fmt.Sprintf("slow: client latency above %.3f ms (twice the floor's io-heavy p99", 2*floorP99)
		if floorP99 == 0 {
			want = fmt.Sprintf("slow: client latency above %.3f ms (this step's own p99", row.Probe.P99Ms)
		}
		if !strings.HasPrefix(text, want) {
			t.Errorf("%s: the breakdown does not begin with %q:\n%s", row.Mode, want, text)
		}
		checkMatched(t, cfg, row, c)
	}
	if want := len(cfg.Modes) - len(rep.Skipped); seen != want {
		t.Errorf("%d io-heavy rows, want %d", seen, want)
	}
}
