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

// gc returns a window's GC pauses with these figures.
func gc(p99, maxMs, stopMax float64) *GCPauses {
	return &GCPauses{Pauses: 10, PauseP99Ms: p99, PauseMaxMs: maxMs, StoppingP99Ms: stopMax / 2, StoppingMaxMs: stopMax}
}

// handMadeReport has the floor and one mode with every kind of row, and
// reserve's neighbor row.
func handMadeReport() *Report {
	cfg := DefaultConfig("cpusched", "serve")
	cfg.Modes = []string{"floor", "none", "reserve"}
	cfg.NeighborConcurrency = 2
	closed := func(p ProbeResult) *ProbeResult { p.ClosedLoop, p.Connections = true, 32; return &p }
	small := func(p99 float64, waited *float64) *SmallResult {
		s := &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 1.5, P99Ms: p99, P999Ms: p99 + 1, MaxMs: p99 + 2}}
		if waited != nil {
			s.WaitedP50Ms, s.WaitedP99Ms, s.WaitedMaxMs = ptr(0.1), waited, ptr(*waited+1)
		}
		return s
	}
	nb := func(passes float64) *NeighborResult { return &NeighborResult{PassesPerS: passes, Threads: 2} }
	late := nb(150000)
	late.FinishedAfterPause, late.TailAfterPause = 5, 3
	rep := &Report{
		Machine: Machine{CPU: "Test CPU", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26", Kernel: "6.1.0", OS: "linux/amd64"},
		Config:  reportConfig(cfg),
		Servers: []string{"floor: isolation=none workers=2 gomaxprocs=2; hog: 10 goroutines in a separate process, its 5 threads SCHED_IDLE",
			"none: isolation=none workers=2 gomaxprocs=2", "reserve: isolation=reserve workers=1 gomaxprocs=2"},
		Results: []Result{
			{Mode: "floor", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P50Ms: 1.1, P99Ms: 1.25, P999Ms: 2, MaxMs: 3},
				CPUBusyPct: ptr(4), GC: &GCPauses{}},
			{Mode: "floor", Step: StepHogSched, Probe: &ProbeResult{RPS: 200, P50Ms: 1.2, P99Ms: 2, P999Ms: 3, MaxMs: 4},
				Hog: &HogResult{PassesPerS: 240000, FloorHog: true}, CPUBusyPct: ptr(100), GC: gc(0.5, 0.75, 0.05)},
			{Mode: "floor", Step: StepIOHeavy, Probe: closed(ProbeResult{RPS: 5000, P50Ms: 0.9, P99Ms: 2.5, P999Ms: 4, MaxMs: 5}),
				Hog: &HogResult{PassesPerS: 150000, FloorHog: true}, CPUBusyPct: ptr(100), GC: gc(0.5, 0.75, 0.05)},
			{Mode: "floor", Step: StepNeighborAlone, Probe: &ProbeResult{RPS: 200, P50Ms: 1.5, P99Ms: 4, P999Ms: 6, MaxMs: 8},
				Neighbor: nb(200000), CPUBusyPct: ptr(100), GC: gc(1, 1.5, 0.1)},
			{Mode: "floor", Step: StepNeighbor, Probe: &ProbeResult{RPS: 200, P50Ms: 1.6, P99Ms: 5, P999Ms: 7, MaxMs: 9},
				Hog: &HogResult{PassesPerS: 1000, FloorHog: true}, SmallDirect: small(6, nil), Neighbor: nb(190000), CPUBusyPct: ptr(100), GC: gc(1, 2, 0.2)},
			{Mode: "none", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P50Ms: 1.2, P99Ms: 1.5, P999Ms: 2, MaxMs: 3},
				CPUBusyPct: ptr(5), GC: &GCPauses{}},
			{Mode: "none", Step: StepHogDirect, Probe: &ProbeResult{RPS: 190, P50Ms: 100, P99Ms: 150, P999Ms: 200, MaxMs: 250, Errors: 2},
				Hog: &HogResult{PassesPerS: 300000}, CPUBusyPct: ptr(100), GC: gc(0.5, 0.5, 0.25)},
			{Mode: "none", Step: StepHogSched, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 3, P999Ms: 4, MaxMs: 5},
				Hog: &HogResult{PassesPerS: 150000}, CPUBusyPct: ptr(60), GC: gc(0.5, 0.5, 0.25)},
			{Mode: "none", Step: StepHogNoCkpt, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 5, P999Ms: 6, MaxMs: 7},
				Hog: &HogResult{PassesPerS: 270000}, CPUBusyPct: ptr(100), GC: gc(0.5, 0.5, 0.25)},
			{Mode: "none", Step: StepHogSchedSm, Probe: &ProbeResult{RPS: 200, P50Ms: 1.4, P99Ms: 4, P999Ms: 5, MaxMs: 6},
				Hog: &HogResult{PassesPerS: 120000}, Small: small(11, ptr(1.25)), SmallDirect: small(8, nil),
				CPUBusyPct: nil, GC: gc(0.9, 0.9, 0.3)},
			{Mode: "none", Step: StepIOHeavy, Probe: closed(ProbeResult{RPS: 4000, P50Ms: 1.5, P99Ms: 5, P999Ms: 8, MaxMs: 9}),
				Hog: &HogResult{PassesPerS: 210000}, CPUBusyPct: ptr(100), GC: gc(0.9, 0.9, 0.3)},
			{Mode: "none", Step: StepNeighbor, Probe: &ProbeResult{RPS: 200, P50Ms: 2, P99Ms: 10, P999Ms: 12, MaxMs: 14},
				Hog: &HogResult{PassesPerS: 50000}, Small: small(20, ptr(5)), SmallDirect: small(8, nil), Neighbor: late,
				CPUBusyPct: ptr(100), GC: gc(2, 4, 1)},
			{Mode: "none", Step: StepAuto, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 2.5, P999Ms: 3.5, MaxMs: 4.5},
				Hog: &HogResult{PassesPerS: 285000}, CPUBusyPct: ptr(100), GC: gc(0.5, 0.5, 0.25),
				Auto: &AutoResult{Route: autoRoute, Heavy: true, CPUMs: 250, PrimeRequests: 1}},
			{Mode: "reserve", Step: StepNeighbor, Probe: &ProbeResult{RPS: 200, P50Ms: 2, P99Ms: 7.5, P999Ms: 9, MaxMs: 10},
				Hog: &HogResult{PassesPerS: 40000}, Small: small(16, ptr(4)), SmallDirect: small(8, nil), Neighbor: nb(160000),
				CPUBusyPct: ptr(100), GC: gc(2, 3, 0.5)},
		},
	}
	rep.Config.Server, rep.Config.ServerNote = "unprivileged (uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0)", "as a container runs a service"
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
		"":        {"config", "machine", "results", "skipped"},
		"machine": {"cpu", "cpus", "go", "gomaxprocs", "kernel", "os"},
		"config": {"garbage", "garbage_bytes", "gc_note", "hog_concurrency", "io_concurrency", "io_path", "modes", "neighbor_concurrency",
			"privileged", "probe_rate", "quick", "server", "shape", "small_rate", "step_s", "task_garbage_bytes"},
		"shape":        {"name"},
		"row":          {"cpu_busy_pct", "gc", "hog", "mode", "neighbor", "probe", "small", "small_direct", "step", "vs_floor"},
		"gc":           {"pause_max_ms", "pause_p99_ms", "pauses", "stopping_max_ms", "stopping_p99_ms"},
		"neighbor":     {"finished_after_pause", "passes_per_s", "tail_after_pause", "threads"},
		"probe":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"closed probe": {"closed_loop", "connections", "errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"hog":          {"direct_ref", "passes_per_s", "pct_of_direct", "pct_of_floor"},
		"hog, no ref":  {"passes_per_s", "pct_of_direct", "pct_of_floor"}, // reserve: no hog-direct row
		"floor hog":    {"direct_ref", "floor_hog", "passes_per_s", "pct_of_direct", "pct_of_floor"},
		"small":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps", "waited_max_ms", "waited_p50_ms", "waited_p99_ms"},
		"small_direct": {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"vs_floor":     {"floor_step", "p99_x", "rps_pct"},
		"auto row":     {"auto", "cpu_busy_pct", "gc", "hog", "mode", "neighbor", "probe", "small", "small_direct", "step", "vs_floor"},
		"auto":         {"cpu_ms", "heavy", "moves", "prime_requests", "route"},
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
	check("shape", doc["config"].(map[string]any)["shape"].(map[string]any))
	check("skipped", doc["skipped"].([]any)[0].(map[string]any))
	rows := doc["results"].([]any)
	if len(rows) != 14 {
		t.Fatalf("got %d results, want 14", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		mode, step := row["mode"].(string), row["step"].(string)
		if step == StepAuto {
			check("auto row", row)
			check("auto", row["auto"].(map[string]any))
		} else {
			check("row", row)
		}
		if step == StepIOHeavy {
			check("closed probe", row["probe"].(map[string]any))
		} else {
			check("probe", row["probe"].(map[string]any))
		}
		wantHog := step != StepIdle && step != StepNeighborAlone
		wantSmall := step == StepHogSchedSm || step == StepNeighbor || step == StepNeighborNoCkpt
		wantFloor := mode != ModeFloor && floorStepOf(step) != ""
		check("gc", row["gc"].(map[string]any))
		if hog, ok := row["hog"].(map[string]any); ok != wantHog {
			t.Errorf("row %d (%s): got hog %v, want present=%v (null otherwise)", i, step, row["hog"], wantHog)
		} else if ok && mode == ModeFloor {
			check("floor hog", hog)
		} else if ok && mode == "reserve" {
			check("hog, no ref", hog)
		} else if ok {
			check("hog", hog)
		}
		for _, key := range []string{"small", "small_direct"} {
			want := wantSmall && (key == "small_direct" || mode != ModeFloor)
			if small, ok := row[key].(map[string]any); ok != want {
				t.Errorf("row %d (%s/%s): got %s %v, want present=%v (null otherwise)", i, mode, step, key, row[key], want)
			} else if ok {
				check(key, small)
			}
		}
		if nb, ok := row["neighbor"].(map[string]any); ok != withNeighbor(step) {
			t.Errorf("row %d (%s/%s): got neighbor %v, want present=%v (null otherwise)", i, mode, step, row["neighbor"], withNeighbor(step))
		} else if ok {
			check("neighbor", nb)
		}
		if vs, ok := row["vs_floor"].(map[string]any); ok != wantFloor {
			t.Errorf("row %d (%s/%s): got vs_floor %v, want present=%v (null otherwise)", i, mode, step, row["vs_floor"], wantFloor)
		} else if ok {
			check("vs_floor", vs)
		}
	}
	// none's hog-sched: 150000/300000 of direct, 150000/240000 of the
	// floor's, p99 3 against the floor's 2.
	sched := rows[7].(map[string]any)
	if got := sched["hog"].(map[string]any)["pct_of_direct"]; got != 50.0 {
		t.Errorf("hog-sched pct_of_direct: got %v, want 50", got)
	}
	if got := sched["hog"].(map[string]any)["pct_of_floor"]; got != 62.5 {
		t.Errorf("hog-sched pct_of_floor: got %v, want 62.5", got)
	}
	if got := sched["vs_floor"].(map[string]any)["p99_x"]; got != 1.5 {
		t.Errorf("hog-sched p99_x: got %v, want 1.5", got)
	}
	if got := rows[9].(map[string]any)["cpu_busy_pct"]; got != nil {
		t.Errorf("cpu_busy_pct without /proc/stat: got %v, want null", got)
	}
	if got := rows[11].(map[string]any)["gc"].(map[string]any)["stopping_max_ms"]; got != 1.0 {
		t.Errorf("none/neighbor gc.stopping_max_ms: got %v, want 1", got)
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
		{StepNeighbor, StepNeighbor, 10.0 / 5, 100},
		{StepAuto, StepHogSched, 2.5 / 2, 100},
	}
	for _, tt := range tests {
		v := rep.find("none", tt.step).VsFloor
		if v == nil || v.Step != tt.floorStep || math.Abs(v.P99X-tt.p99X) > 1e-9 || math.Abs(v.RPSPct-tt.rpsPct) > 1e-9 {
			t.Errorf("%s: got %+v, want the floor's %s, p99 %.3gx, %.3g%% of its req/s", tt.step, v, tt.floorStep, tt.p99X, tt.rpsPct)
		}
	}
	for _, step := range []string{StepHogDirect, StepHogSchedSm} {
		if row := rep.find("none", step); row.VsFloor != nil || row.Hog.PctOfFloor != nil {
			t.Errorf("%s: got %+v, %% of floor %v; want none (no floor counterpart)", step, row.VsFloor, row.Hog.PctOfFloor)
		}
	}
	// The hog's share of the floor's, in the step compared with.
	for _, tt := range []struct {
		mode, step string
		want       float64
	}{
		{"none", StepHogSched, 62.5}, {"none", StepHogNoCkpt, 112.5}, {"none", StepIOHeavy, 140},
		{"none", StepNeighbor, 5000}, {"reserve", StepNeighbor, 4000}, {"none", StepAuto, 118.75},
	} {
		if got := rep.find(tt.mode, tt.step).Hog.PctOfFloor; got == nil || math.Abs(*got-tt.want) > 1e-9 {
			t.Errorf("%s/%s: got %% of floor %v, want %v", tt.mode, tt.step, got, tt.want)
		}
	}
	h := rep.find(ModeFloor, StepHogSched).Hog
	if h.PctOfDirect == nil || *h.PctOfDirect != 80 || h.DirectRef != "none/hog-direct" {
		t.Errorf("the floor's hog: got %+v, want 80%% of none/hog-direct", h)
	}
	// Without the floor, no ratios.
	rep = handMadeReport()
	rep.Results = rep.Results[5:]
	rep.fill()
	for _, row := range rep.Results {
		if row.VsFloor != nil || row.Hog != nil && row.Hog.PctOfFloor != nil {
			t.Errorf("%s without a floor: got vs_floor %+v, hog %+v; want no ratio", row.Step, row.VsFloor, row.Hog)
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
	rep, retired := handMadeReport(), uint64(3)
	rep.find("reserve", StepNeighbor).RetiredThreads = &retired // as if reserve retired threads: the column's format
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"machine: Test CPU, 2 CPUs, GOMAXPROCS 2, go1.26, linux/amd64 6.1.0\n",
		"steps of 7s after 500ms warm-up;",
		"io-heavy /delay?d=500us closed loop c=32; neighbour 2 threads\n",
		"garbage: every fast request builds a 32 KiB response buffer, and the CRC32 work allocates 8 KiB every 64 passes (the default; -clean: none, -gc: 256 KiB per request)\n",
		"server:  unprivileged (uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0): as a container runs a service\nservers: floor: isolation=none workers=2 gomaxprocs=2; hog: 10 goroutines in a separate process, its 5 threads SCHED_IDLE; none: isolation=none",
		"gc p99, gc max: the server's GC pauses in the window, stop max: the longest time to stop the world in it, ms;",
		"floor: no task in the server, the same CPU work in a separate SCHED_IDLE process; p99 x floor and % of floor: the p99 and the hog's passes/s over the floor's same step (hog-nockpt, auto: its hog-sched); its % of direct is of none/hog-direct\n",
		"probe errors (failed or non-2xx responses): 2 in all",
		"floor: probe p99 1.25 ms idle, 2.00 ms beside the same CPU work in a separate SCHED_IDLE process (1.60x higher than idle), " +
			"which made 240,000 passes/s (80% of none/hog-direct); io-heavy p99 2.50 ms at 5,000 req/s\n",
		"floor: beside the neighbour: probe p99 5.00 ms with the SCHED_IDLE hog (1.25x higher than the neighbour alone's 4.00 ms), " +
			"which made 1,000 passes/s; the neighbour 190,000 passes/s; GC pauses up to 2.00 ms\n",
		"none: probe p99 1.50 ms idle (1.20x the floor), 150 ms under the direct CPU load (100x higher than idle), " +
			"3.00 ms with that load through cpusched (50.0x lower than hog-direct; 1.50x the floor) at 50% of its throughput\n",
		"none: probe p99 5.00 ms with that load through cpusched without a Checkpoint (2.50x the floor's hog-sched) at 90% of its throughput\n",
		"none: probe p99 2.50 ms with that load on the direct path of a server served whole by httpsched.Auto, no route marked (1.25x the floor's hog-sched) " +
			"at 95% of its throughput; Auto ran GET /checksum as tasks over the whole window (250 ms of CPU per request)\n",
		"none: small requests p99 11.0 ms through cpusched, 8.00 ms run directly at the same rate (1.38x higher than direct); the scheduler's own wait p99 1.25 ms\n",
		"none: io-heavy (closed loop, 32 connections) p99 5.00 ms (2.00x the floor), 4,000 req/s (80% of the floor's), beside the load through cpusched at 70% of its throughput (140% of the floor's)\n",
		"none: beside the neighbour: probe p99 10.0 ms (2.00x the floor), the hog at 50,000 passes/s (5000% of the floor's), 125% of reserve's; " +
			"small requests p99 20.0 ms (1.25x higher than reserve's 16.0 ms); the neighbour 150,000 passes/s " +
			"(3 requests in the tail when the window closed ended only after it was paused: the tail is a lower bound); GC pauses up to 4.00 ms (2.00x higher than the floor's 2.00 ms)\n",
		"reserve: beside the neighbour: probe p99 7.50 ms (1.50x the floor), the hog at 40,000 passes/s (4000% of the floor's); " +
			"small requests p99 16.0 ms; the neighbour 160,000 passes/s; GC pauses up to 3.00 ms (1.50x higher than the floor's 2.00 ms)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q; got:\n%s", want, out)
		}
	}
	// The rows, by their fields ("-" where a step has no such load).
	wantRows := [][]string{
		{"floor", "idle", "1.10", "1.25", "2.00", "3.00", "200", "-", "-", "-", "-", "-", "-", "-", "-", "4.0%", "0", "0", "0", "-", "-", "-"},
		{"floor", "hog-sched", "1.20", "2.00", "3.00", "4.00", "200", "-", "240,000", "80%", "-", "-", "-", "-", "-", "100%", "0.500", "0.750", "0.0500", "-", "-", "-"},
		{"floor", "io-heavy", "0.900", "2.50", "4.00", "5.00", "5,000", "-", "150,000", "50%", "-", "-", "-", "-", "-", "100%", "0.500", "0.750", "0.0500", "-", "-", "-"},
		{"floor", "neighbor-alone", "1.50", "4.00", "6.00", "8.00", "200", "-", "-", "-", "-", "-", "-", "-", "200,000", "100%", "1.00", "1.50", "0.100", "-", "-", "-"},
		{"floor", "neighbor", "1.60", "5.00", "7.00", "9.00", "200", "-", "1,000", "0.3%", "-", "-", "6.00", "-", "190,000", "100%", "1.00", "2.00", "0.200", "-", "-", "-"},
		{"none", "idle", "1.20", "1.50", "2.00", "3.00", "200", "1.20", "-", "-", "-", "-", "-", "-", "-", "5.0%", "0", "0", "0", "-", "-", "-"},
		{"none", "hog-direct", "100", "150", "200", "250", "190", "-", "300,000", "100%", "-", "-", "-", "-", "-", "100%", "0.500", "0.500", "0.250", "-", "-", "-"},
		{"none", "hog-sched", "1.30", "3.00", "4.00", "5.00", "200", "1.50", "150,000", "50%", "62%", "-", "-", "-", "-", "60%", "0.500", "0.500", "0.250", "-", "-", "-"},
		{"none", "hog-nockpt", "1.30", "5.00", "6.00", "7.00", "200", "2.50", "270,000", "90%", "112%", "-", "-", "-", "-", "100%", "0.500", "0.500", "0.250", "-", "-", "-"},
		{"none", "hog-sched+small", "1.40", "4.00", "5.00", "6.00", "200", "-", "120,000", "40%", "-", "11.0", "8.00", "1.25", "-", "-", "0.900", "0.900", "0.300", "-", "-", "-"},
		{"none", "io-heavy", "1.50", "5.00", "8.00", "9.00", "4,000", "2.00", "210,000", "70%", "140%", "-", "-", "-", "-", "100%", "0.900", "0.900", "0.300", "-", "-", "-"},
		{"none", "neighbor", "2.00", "10.0", "12.0", "14.0", "200", "2.00", "50,000", "17%", "5000%", "20.0", "8.00", "5.00", "150,000", "100%", "2.00", "4.00", "1.00", "-", "-", "-"},
		{"none", "auto", "1.30", "2.50", "3.50", "4.50", "200", "1.25", "285,000", "95%", "119%", "-", "-", "-", "-", "100%", "0.500", "0.500", "0.250", "-", "-", "-"},
		{"reserve", "neighbor", "2.00", "7.50", "9.00", "10.0", "200", "1.50", "40,000", "-", "4000%", "16.0", "8.00", "4.00", "160,000", "100%", "2.00", "3.00", "0.500", "-", "-", "3"},
	}
	var gotRows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 22 && slices.Contains(handMadeReport().Config.Modes, f[0]) {
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
	rep.Results, rep.Servers = rep.Results[5:], rep.Servers[1:]
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
// with, hog-nockpt's and auto's by the floor's hog-sched.
func TestPlotRows(t *testing.T) {
	var got []string
	for _, row := range handMadeReport().plotRows() {
		got = append(got, row.Mode+"/"+row.Step)
	}
	want := []string{"floor/idle", "none/idle", "none/hog-direct", "floor/hog-sched", "none/hog-sched",
		"floor/hog-sched", "none/hog-nockpt", "none/hog-sched+small", "floor/io-heavy", "none/io-heavy",
		"floor/neighbor-alone", "floor/neighbor", "none/neighbor", "reserve/neighbor", "floor/hog-sched", "none/auto"}
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
	rep.Results = rep.Results[5:]
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

// TestAutoFindings: the auto line says whether Auto ran the route as
// tasks over the whole window, and what is missing.
func TestAutoFindings(t *testing.T) {
	row := func(a *AutoResult) *Result {
		return &Result{Mode: "none", Step: StepAuto, Probe: &ProbeResult{RPS: 200, P99Ms: 3}, Hog: &HogResult{PassesPerS: 1}, Auto: a}
	}
	const probe = "probe p99 3.00 ms with that load on the direct path of a server served whole by httpsched.Auto, no route marked"
	for _, tt := range []struct {
		name string
		row  *Result
		want string
	}{
		{"none", nil, ""},
		{"no probe", &Result{Mode: "none", Step: StepAuto}, ""},
		{"heavy", row(&AutoResult{Route: autoRoute, Heavy: true, CPUMs: 120}),
			probe + "; Auto ran GET /checksum as tasks over the whole window (120 ms of CPU per request)"},
		{"moved", row(&AutoResult{Route: autoRoute, Moves: 2, CPUMs: 0.3}),
			probe + "; Auto did not run GET /checksum as tasks over the whole window (2 moves in it, 0.300 ms of CPU per request): the row is not Auto's steady state"},
		{"no route", row(nil), probe + "; the server reported no Auto route GET /checksum"},
	} {
		if got := autoFindings(tt.row); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestNeighborNoCkptFindings: neighbor-nockpt gets a summary line of its
// own, against the floor's neighbor step and reserve's neighbor-nockpt,
// and leaves the neighbor line as it was.
func TestNeighborNoCkptFindings(t *testing.T) {
	rep := handMadeReport()
	nb := func(passes float64) *NeighborResult { return &NeighborResult{PassesPerS: passes, Threads: 2} }
	small := &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 2, P99Ms: 40, P999Ms: 41, MaxMs: 42},
		WaitedP50Ms: ptr(1.0), WaitedP99Ms: ptr(30.0), WaitedMaxMs: ptr(31.0)}
	rep.Results = append(rep.Results,
		Result{Mode: "none", Step: StepNeighborNoCkpt, Probe: &ProbeResult{RPS: 200, P50Ms: 2, P99Ms: 15, P999Ms: 16, MaxMs: 17},
			Hog: &HogResult{PassesPerS: 60000}, Small: small, SmallDirect: small, Neighbor: nb(140000), CPUBusyPct: ptr(100), GC: gc(2, 8, 1)},
		Result{Mode: "reserve", Step: StepNeighborNoCkpt, Probe: &ProbeResult{RPS: 200, P50Ms: 2, P99Ms: 20, P999Ms: 21, MaxMs: 22},
			Hog: &HogResult{PassesPerS: 30000}, Small: small, SmallDirect: small, Neighbor: nb(150000), CPUBusyPct: ptr(100), GC: gc(2, 3, 0.5)})
	rep.fill()
	if v := rep.find("none", StepNeighborNoCkpt).VsFloor; v == nil || v.Step != StepNeighbor || v.P99X != 3 {
		t.Fatalf("none/%s: got vs_floor %+v, want against the floor's %s (3x)", StepNeighborNoCkpt, v, StepNeighbor)
	}
	var buf bytes.Buffer
	if err := rep.WriteTable(&buf); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"none: beside the neighbour, the tasks without a Checkpoint: probe p99 15.0 ms (3.00x the floor's neighbor), the hog at 60,000 passes/s (6000% of the floor's), 200% of reserve's; " +
			"small requests p99 40.0 ms (about the same as reserve's 40.0 ms); the neighbour 140,000 passes/s; GC pauses up to 8.00 ms (4.00x higher than the floor's 2.00 ms)\n",
		"none: beside the neighbour: probe p99 10.0 ms (2.00x the floor), the hog at 50,000 passes/s (5000% of the floor's), 125% of reserve's;",
		"over the floor's same step (hog-nockpt, auto: its hog-sched; neighbor-nockpt: its neighbor)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q; got:\n%s", want, out)
		}
	}
}
