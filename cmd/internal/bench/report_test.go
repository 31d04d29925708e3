package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func ptr(v float64) *float64 { return &v }

// handMadeReport has the floor and one mode with every kind of row.
func handMadeReport() *Report {
	cfg := DefaultConfig("cpusched", "serve")
	cfg.Modes = []string{"floor", "none"}
	closed := func(p ProbeResult) *ProbeResult { p.ClosedLoop, p.Connections = true, 32; return &p }
	rep := &Report{
		Machine: Machine{CPU: "Test CPU", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26", Kernel: "6.1.0", OS: "linux/amd64"},
		Config:  reportConfig(cfg),
		Servers: []string{"floor: isolation=none workers=2 gomaxprocs=2; hog: 10 goroutines in a separate process, its 5 threads SCHED_IDLE",
			"none: isolation=none workers=2 gomaxprocs=2"},
		Results: []Result{
			{Mode: "floor", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P50Ms: 1.1, P99Ms: 1.25, P999Ms: 2, MaxMs: 3},
				CPUBusyPct: ptr(4), GCStopMaxMs: ptr(0)},
			{Mode: "floor", Step: StepHogSched, Probe: &ProbeResult{RPS: 200, P50Ms: 1.2, P99Ms: 2, P999Ms: 3, MaxMs: 4},
				Hog: &HogResult{PassesPerS: 240000, FloorHog: true}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0)},
			{Mode: "floor", Step: StepIOHeavy, Probe: closed(ProbeResult{RPS: 5000, P50Ms: 0.9, P99Ms: 2.5, P999Ms: 4, MaxMs: 5}),
				Hog: &HogResult{PassesPerS: 150000, FloorHog: true}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0)},
			{Mode: "none", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P50Ms: 1.2, P99Ms: 1.5, P999Ms: 2, MaxMs: 3},
				CPUBusyPct: ptr(5), GCStopMaxMs: ptr(0)},
			{Mode: "none", Step: StepHogDirect, Probe: &ProbeResult{RPS: 190, P50Ms: 100, P99Ms: 150, P999Ms: 200, MaxMs: 250, Errors: 2},
				Hog: &HogResult{PassesPerS: 300000}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0.5)},
			{Mode: "none", Step: StepHogSched, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 3, P999Ms: 4, MaxMs: 5},
				Hog: &HogResult{PassesPerS: 150000}, CPUBusyPct: ptr(60), GCStopMaxMs: ptr(0.5)},
			{Mode: "none", Step: StepHogNoCkpt, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 5, P999Ms: 6, MaxMs: 7},
				Hog: &HogResult{PassesPerS: 270000}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0.5)},
			{Mode: "none", Step: StepHogSchedSm, Probe: &ProbeResult{RPS: 200, P50Ms: 1.4, P99Ms: 4, P999Ms: 5, MaxMs: 6},
				Hog: &HogResult{PassesPerS: 120000}, Small: &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 1.5, P99Ms: 11, P999Ms: 12, MaxMs: 13}, WaitedP50Ms: ptr(0.1), WaitedP99Ms: ptr(1.25), WaitedMaxMs: ptr(2)},
				SmallDirect: &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 1, P99Ms: 8, P999Ms: 9, MaxMs: 10}},
				CPUBusyPct:  nil, GCStopMaxMs: ptr(0.9)},
			{Mode: "none", Step: StepIOHeavy, Probe: closed(ProbeResult{RPS: 4000, P50Ms: 1.5, P99Ms: 5, P999Ms: 8, MaxMs: 9}),
				Hog: &HogResult{PassesPerS: 210000}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0.9)},
		},
	}
	rep.fill()
	return rep
}

func sortedKeys(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestWriteJSONShape(t *testing.T) {
	var buf bytes.Buffer
	rep := handMadeReport()
	rep.Skipped = []Skipped{{Mode: "ospriority:1", Reason: "for the test"}}
	if err := rep.WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("got invalid JSON %v:\n%s", err, buf.String())
	}
	wantKeys := map[string][]string{
		"":             {"config", "machine", "results", "skipped"},
		"machine":      {"cpu", "cpus", "go", "gomaxprocs", "kernel", "os"},
		"config":       {"gc", "gc_stop_max_note", "hog_concurrency", "io_concurrency", "io_path", "modes", "probe_rate", "quick", "small_rate", "step_s"},
		"row":          {"cpu_busy_pct", "gc_stop_max_ms", "hog", "mode", "probe", "small", "small_direct", "step", "vs_floor"},
		"probe":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"closed probe": {"closed_loop", "connections", "errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"hog":          {"direct_ref", "passes_per_s", "pct_of_direct"},
		"floor hog":    {"direct_ref", "floor_hog", "passes_per_s", "pct_of_direct"},
		"small":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps", "waited_max_ms", "waited_p50_ms", "waited_p99_ms"},
		"small_direct": {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"vs_floor":     {"floor_step", "p99_x", "rps_pct"},
		"skipped":      {"mode", "reason"},
	}
	check := func(what string, m map[string]any) {
		t.Helper()
		if got := sortedKeys(m); !reflect.DeepEqual(got, wantKeys[what]) {
			t.Errorf("%s keys: got %v, want %v", what, got, wantKeys[what])
		}
	}
	check("", doc)
	check("machine", doc["machine"].(map[string]any))
	check("config", doc["config"].(map[string]any))
	check("skipped", doc["skipped"].([]any)[0].(map[string]any))
	rows := doc["results"].([]any)
	if len(rows) != 9 {
		t.Fatalf("got %d results, want 9", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		mode, step := row["mode"].(string), row["step"].(string)
		check("row", row)
		if step == StepIOHeavy {
			check("closed probe", row["probe"].(map[string]any))
		} else {
			check("probe", row["probe"].(map[string]any))
		}
		wantHog := step != StepIdle
		wantSmall := step == StepHogSchedSm
		wantFloor := mode != ModeFloor && floorStepOf(step) != ""
		if hog, ok := row["hog"].(map[string]any); ok != wantHog {
			t.Errorf("row %d (%s): got hog %v, want present=%v (null otherwise)", i, step, row["hog"], wantHog)
		} else if ok && mode == ModeFloor {
			check("floor hog", hog)
		} else if ok && step != StepHogDirect || ok && mode != "none" {
			check("hog", hog)
		}
		for _, key := range []string{"small", "small_direct"} {
			if small, ok := row[key].(map[string]any); ok != wantSmall {
				t.Errorf("row %d (%s): got %s %v, want present=%v (null otherwise)", i, step, key, row[key], wantSmall)
			} else if ok {
				check(key, small)
			}
		}
		if vs, ok := row["vs_floor"].(map[string]any); ok != wantFloor {
			t.Errorf("row %d (%s/%s): got vs_floor %v, want present=%v (null otherwise)", i, mode, step, row["vs_floor"], wantFloor)
		} else if ok {
			check("vs_floor", vs)
		}
	}
	// none's hog-sched: 150000/300000 of direct, p99 3 against the floor's 2.
	sched := rows[5].(map[string]any)
	if got := sched["hog"].(map[string]any)["pct_of_direct"]; got != 50.0 {
		t.Errorf("hog-sched pct_of_direct: got %v, want 50", got)
	}
	if got := sched["vs_floor"].(map[string]any)["p99_x"]; got != 1.5 {
		t.Errorf("hog-sched p99_x: got %v, want 1.5", got)
	}
	if got := rows[7].(map[string]any)["cpu_busy_pct"]; got != nil {
		t.Errorf("cpu_busy_pct without /proc/stat: got %v, want null", got)
	}
}

// TestFillVsFloor: each row's ratios are to the floor's row of the step it
// compares with, in the same report; the floor's hog is a share of none's
// hog-direct.
func TestFillVsFloor(t *testing.T) {
	rep := handMadeReport()
	tests := []struct {
		step      string
		floorStep string
		p99X      float64
		rpsPct    float64
	}{
		{StepIdle, StepIdle, 1.5 / 1.25, 100},
		{StepHogSched, StepHogSched, 3.0 / 2, 100},
		{StepHogNoCkpt, StepHogSched, 5.0 / 2, 100},
		{StepIOHeavy, StepIOHeavy, 5 / 2.5, 80},
	}
	for _, tt := range tests {
		v := rep.find("none", tt.step).VsFloor
		if v == nil || v.Step != tt.floorStep || math.Abs(v.P99X-tt.p99X) > 1e-9 || math.Abs(v.RPSPct-tt.rpsPct) > 1e-9 {
			t.Errorf("%s: got %+v, want the floor's %s, p99 %.3gx, %.3g%% of its req/s", tt.step, v, tt.floorStep, tt.p99X, tt.rpsPct)
		}
	}
	for _, step := range []string{StepHogDirect, StepHogSchedSm} {
		if v := rep.find("none", step).VsFloor; v != nil {
			t.Errorf("%s: got %+v, want none (no floor counterpart)", step, v)
		}
	}
	h := rep.find(ModeFloor, StepHogSched).Hog
	if h.PctOfDirect == nil || *h.PctOfDirect != 80 || h.DirectRef != "none/hog-direct" {
		t.Errorf("the floor's hog: got %+v, want 80%% of none/hog-direct", h)
	}
	// Without the floor, no ratios.
	rep = handMadeReport()
	rep.Results = rep.Results[3:]
	rep.fill()
	for _, row := range rep.Results {
		if row.VsFloor != nil {
			t.Errorf("%s without a floor: got vs_floor %+v, want nil", row.Step, row.VsFloor)
		}
	}
}

func TestPctOfDirectWithoutDirectStep(t *testing.T) {
	rep := &Report{Results: []Result{{Mode: "none", Step: StepHogSched, Hog: &HogResult{PassesPerS: 10}},
		{Mode: ModeFloor, Step: StepHogSched, Hog: &HogResult{PassesPerS: 10, FloorHog: true}}}}
	rep.fill()
	for _, row := range rep.Results {
		if got := row.Hog.PctOfDirect; got != nil || row.Hog.DirectRef != "" {
			t.Errorf("%s: got pct_of_direct %v of %q, want nil (no hog-direct row)", row.Mode, *got, row.Hog.DirectRef)
		}
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	if err := handMadeReport().WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"machine: Test CPU, 2 CPUs, GOMAXPROCS 2, go1.26, linux/amd64 6.1.0\n",
		"steps of 7s after 500ms warm-up;",
		"io-heavy /delay?d=500us closed loop c=32;",
		"servers: floor: isolation=none workers=2 gomaxprocs=2; hog: 10 goroutines in a separate process, its 5 threads SCHED_IDLE; none: isolation=none",
		"floor: no task in the server, the same CPU work in a separate SCHED_IDLE process; p99 x floor: the p99 over the floor's same step (hog-nockpt: its hog-sched); its % of direct is of none/hog-direct\n",
		"probe errors (failed or non-2xx responses): 2 in all",
		"floor: probe p99 1.25 ms idle, 2.00 ms beside the same CPU work in a separate SCHED_IDLE process (1.60x higher than idle), " +
			"which made 240,000 passes/s (80% of none/hog-direct); io-heavy p99 2.50 ms at 5,000 req/s\n",
		"none: probe p99 1.50 ms idle (1.20x the floor), 150 ms under the direct CPU load (100x higher than idle), " +
			"3.00 ms with that load through cpusched (50.0x lower than hog-direct; 1.50x the floor) at 50% of its throughput\n",
		"none: probe p99 5.00 ms with that load through cpusched without a Checkpoint (2.50x the floor's hog-sched) at 90% of its throughput\n",
		"none: small requests p99 11.0 ms through cpusched, 8.00 ms run directly at the same rate (1.38x higher than direct); the scheduler's own wait p99 1.25 ms\n",
		"none: io-heavy (closed loop, 32 connections) p99 5.00 ms (2.00x the floor), 4,000 req/s (80% of the floor's), beside the load through cpusched at 70% of its throughput\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q; got:\n%s", want, out)
		}
	}
	// The rows, by their fields ("-" where a step has no such load).
	wantRows := [][]string{
		{"floor", "idle", "open", "1.10", "1.25", "2.00", "3.00", "200", "-", "-", "-", "-", "-", "-", "-", "4.0%", "0", "-"},
		{"floor", "hog-sched", "open", "1.20", "2.00", "3.00", "4.00", "200", "-", "240,000", "80%", "-", "-", "-", "-", "100%", "0", "-"},
		{"floor", "io-heavy", "closed", "0.900", "2.50", "4.00", "5.00", "5,000", "-", "150,000", "50%", "-", "-", "-", "-", "100%", "0", "-"},
		{"none", "idle", "open", "1.20", "1.50", "2.00", "3.00", "200", "1.20", "-", "-", "-", "-", "-", "-", "5.0%", "0", "-"},
		{"none", "hog-direct", "open", "100", "150", "200", "250", "190", "-", "300,000", "100%", "-", "-", "-", "-", "100%", "0.500", "-"},
		{"none", "hog-sched", "open", "1.30", "3.00", "4.00", "5.00", "200", "1.50", "150,000", "50%", "-", "-", "-", "-", "60%", "0.500", "-"},
		{"none", "hog-nockpt", "open", "1.30", "5.00", "6.00", "7.00", "200", "2.50", "270,000", "90%", "-", "-", "-", "-", "100%", "0.500", "-"},
		{"none", "hog-sched+small", "open", "1.40", "4.00", "5.00", "6.00", "200", "-", "120,000", "40%", "1.50", "11.0", "8.00", "1.25", "-", "0.900", "-"},
		{"none", "io-heavy", "closed", "1.50", "5.00", "8.00", "9.00", "4,000", "2.00", "210,000", "70%", "-", "-", "-", "-", "100%", "0.900", "-"},
	}
	var gotRows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 18 && (f[0] == "none" || f[0] == "floor") {
			gotRows = append(gotRows, f)
		}
	}
	if !reflect.DeepEqual(gotRows, wantRows) {
		t.Errorf("rows: got\n%v\nwant\n%v\nin:\n%s", gotRows, wantRows, out)
	}
}

// TestWriteTableSkippedFloor: a floor that could not run is said so, above
// the table and in its summary line, and no row has a ratio to it.
func TestWriteTableSkippedFloor(t *testing.T) {
	rep := handMadeReport()
	rep.Results, rep.Servers = rep.Results[3:], rep.Servers[1:]
	rep.Skipped = []Skipped{{Mode: ModeFloor, Reason: "the hog's threads cannot be made SCHED_IDLE here: EPERM"}}
	rep.fill()
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"skipped: floor: the hog's threads cannot be made SCHED_IDLE here: EPERM\n",
		"floor: skipped (the hog's threads cannot be made SCHED_IDLE here: EPERM), so no ratio to the floor in this run\n",
		"none: probe p99 1.50 ms idle, 150 ms under",
		"(50.0x lower than hog-direct) at 50%",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q; got:\n%s", want, out)
		}
	}
	if strings.Contains(out, "x the floor") {
		t.Errorf("got a ratio to a floor that did not run:\n%s", out)
	}
}

// TestPlotRows: every step's group is led by the floor's row it compares
// with, hog-nockpt's by the floor's hog-sched.
func TestPlotRows(t *testing.T) {
	var got []string
	for _, row := range handMadeReport().plotRows() {
		got = append(got, row.Mode+"/"+row.Step)
	}
	want := []string{"floor/idle", "none/idle", "none/hog-direct", "floor/hog-sched", "none/hog-sched",
		"floor/hog-sched", "none/hog-nockpt", "none/hog-sched+small", "floor/io-heavy", "none/io-heavy"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

func TestWritePlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := handMadeReport().WritePlot(path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	if err := (&Report{}).WritePlot(path); err == nil {
		t.Errorf("empty report: got nil error, want one")
	}
}

func TestWriteFrontier(t *testing.T) {
	path := filepath.Join(t.TempDir(), "frontier.png")
	if err := handMadeReport().WriteFrontier(path); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	// Without the floor nothing compares with it.
	rep := handMadeReport()
	rep.Results = rep.Results[3:]
	for i := range rep.Results {
		rep.Results[i].VsFloor = nil
	}
	if err := rep.WriteFrontier(path); err == nil {
		t.Errorf("no floor: got nil error, want one")
	}
}

// checkPNG fails t unless path holds a PNG.
func checkPNG(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("got a file starting %q, want a PNG", data[:min(8, len(data))])
	}
}
