package bench

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func ptr(v float64) *float64 { return &v }

// handMadeReport has one mode with every kind of row.
func handMadeReport() *Report {
	cfg := DefaultConfig("cpusched", "serve")
	cfg.Modes = []string{"none"}
	rep := &Report{
		Machine: Machine{CPU: "Test CPU", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26", Kernel: "6.1.0", OS: "linux/amd64"},
		Config:  reportConfig(cfg),
		Servers: []string{"none: isolation=none workers=2 gomaxprocs=2"},
		Results: []Result{
			{Mode: "none", Step: StepIdle, Probe: &ProbeResult{RPS: 200, P50Ms: 1.2, P99Ms: 1.5, P999Ms: 2, MaxMs: 3},
				CPUBusyPct: ptr(5), GCStopMaxMs: ptr(0)},
			{Mode: "none", Step: StepHogDirect, Probe: &ProbeResult{RPS: 190, P50Ms: 100, P99Ms: 150, P999Ms: 200, MaxMs: 250, Errors: 2},
				Hog: &HogResult{PassesPerS: 300000}, CPUBusyPct: ptr(100), GCStopMaxMs: ptr(0.5)},
			{Mode: "none", Step: StepHogSched, Probe: &ProbeResult{RPS: 200, P50Ms: 1.3, P99Ms: 3, P999Ms: 4, MaxMs: 5},
				Hog: &HogResult{PassesPerS: 150000}, CPUBusyPct: ptr(60), GCStopMaxMs: ptr(0.5)},
			{Mode: "none", Step: StepHogSchedSm, Probe: &ProbeResult{RPS: 200, P50Ms: 1.4, P99Ms: 4, P999Ms: 5, MaxMs: 6},
				Hog: &HogResult{PassesPerS: 120000}, Small: &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 1.5, P99Ms: 11, P999Ms: 12, MaxMs: 13}, WaitedP50Ms: ptr(0.1), WaitedP99Ms: ptr(1.25), WaitedMaxMs: ptr(2)},
				SmallDirect: &SmallResult{ProbeResult: ProbeResult{RPS: 200, P50Ms: 1, P99Ms: 8, P999Ms: 9, MaxMs: 10}},
				CPUBusyPct:  nil, GCStopMaxMs: ptr(0.9)},
		},
	}
	rep.fillPctOfDirect()
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
	if err := handMadeReport().WriteJSON(&buf); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatalf("got invalid JSON %v:\n%s", err, buf.String())
	}
	wantKeys := map[string][]string{
		"":             {"config", "machine", "results"},
		"machine":      {"cpu", "cpus", "go", "gomaxprocs", "kernel", "os"},
		"config":       {"gc", "gc_stop_max_note", "hog_concurrency", "modes", "probe_rate", "quick", "small_rate", "step_s"},
		"row":          {"cpu_busy_pct", "gc_stop_max_ms", "hog", "mode", "probe", "small", "small_direct", "step"},
		"probe":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
		"hog":          {"passes_per_s", "pct_of_direct"},
		"small":        {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps", "waited_max_ms", "waited_p50_ms", "waited_p99_ms"},
		"small_direct": {"errors", "max_ms", "p50_ms", "p999_ms", "p99_ms", "rps"},
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
	rows := doc["results"].([]any)
	if len(rows) != 4 {
		t.Fatalf("got %d results, want 4", len(rows))
	}
	for i, r := range rows {
		row := r.(map[string]any)
		check("row", row)
		check("probe", row["probe"].(map[string]any))
		step := row["step"].(string)
		wantHog := step != StepIdle
		wantSmall := step == StepHogSchedSm
		if hog, ok := row["hog"].(map[string]any); ok != wantHog {
			t.Errorf("row %d (%s): got hog %v, want present=%v (null otherwise)", i, step, row["hog"], wantHog)
		} else if ok {
			check("hog", hog)
		}
		for _, key := range []string{"small", "small_direct"} {
			if small, ok := row[key].(map[string]any); ok != wantSmall {
				t.Errorf("row %d (%s): got %s %v, want present=%v (null otherwise)", i, step, key, row[key], wantSmall)
			} else if ok {
				check(key, small)
			}
		}
	}
	// pct_of_direct of hog-sched: 150000/300000.
	if got := rows[2].(map[string]any)["hog"].(map[string]any)["pct_of_direct"]; got != 50.0 {
		t.Errorf("hog-sched pct_of_direct: got %v, want 50", got)
	}
	if got := rows[3].(map[string]any)["cpu_busy_pct"]; got != nil {
		t.Errorf("cpu_busy_pct without /proc/stat: got %v, want null", got)
	}
}

func TestPctOfDirectWithoutDirectStep(t *testing.T) {
	rep := &Report{Results: []Result{{Mode: "none", Step: StepHogSched, Hog: &HogResult{PassesPerS: 10}}}}
	rep.fillPctOfDirect()
	if got := rep.Results[0].Hog.PctOfDirect; got != nil {
		t.Errorf("got pct_of_direct %v, want nil (no hog-direct row)", *got)
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
		"servers: none: isolation=none workers=2 gomaxprocs=2\n",
		"probe errors (failed or non-2xx responses): 2 in all",
		"none: probe p99 1.50 ms idle, 150 ms under the direct CPU load (100x higher than idle), " +
			"3.00 ms with that load through cpusched (50.0x lower than hog-direct) at 50% of its throughput\n",
		"none: small requests p99 11.0 ms through cpusched, 8.00 ms run directly at the same rate (1.38x higher than direct); the scheduler's own wait p99 1.25 ms\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table output lacks %q; got:\n%s", want, out)
		}
	}
	// The rows, by their fields ("-" where a step has no such load).
	wantRows := [][]string{
		{"none", "idle", "1.20", "1.50", "2.00", "3.00", "200", "-", "-", "-", "-", "-", "-", "5.0%", "0"},
		{"none", "hog-direct", "100", "150", "200", "250", "190", "300,000", "100%", "-", "-", "-", "-", "100%", "0.500"},
		{"none", "hog-sched", "1.30", "3.00", "4.00", "5.00", "200", "150,000", "50%", "-", "-", "-", "-", "60%", "0.500"},
		{"none", "hog-sched+small", "1.40", "4.00", "5.00", "6.00", "200", "120,000", "40%", "1.50", "11.0", "8.00", "1.25", "-", "0.900"},
	}
	var gotRows [][]string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 15 && f[0] == "none" {
			gotRows = append(gotRows, f)
		}
	}
	if !reflect.DeepEqual(gotRows, wantRows) {
		t.Errorf("rows: got\n%v\nwant\n%v\nin:\n%s", gotRows, wantRows, out)
	}
}

func TestWritePlot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bench.png")
	if err := handMadeReport().WritePlot(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("got a file starting %q, want a PNG", data[:min(8, len(data))])
	}
	if err := (&Report{}).WritePlot(path); err == nil {
		t.Errorf("empty report: got nil error, want one")
	}
}
