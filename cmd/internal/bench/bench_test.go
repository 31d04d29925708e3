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
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
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

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Config)
		wantErr string // "" means valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"all modes named", func(c *Config) { c.Modes = AllModes() }, ""},
		{"one mode", func(c *Config) { c.Modes = []string{"reserve"} }, ""},
		{"no server", func(c *Config) { c.ServerCmd = nil }, "ServerCmd is required"},
		{"empty server", func(c *Config) { c.ServerCmd = []string{""} }, "ServerCmd is required"},
		{"unknown mode", func(c *Config) { c.Modes = []string{"none", "turbo"} }, `Modes (-modes): unknown isolation mode "turbo" (valid: none, reserve`},
		{"mode twice", func(c *Config) { c.Modes = []string{"none", "none"} }, `mode "none" given twice`},
		{"step zero", func(c *Config) { c.Step = 0 }, "Step (-step) must be in 100ms..10m0s, got 0s"},
		{"step too long", func(c *Config) { c.Step = time.Hour }, "Step (-step) must be in 100ms..10m0s, got 1h0m0s"},
		{"step smallest", func(c *Config) { c.Step = MinStep }, ""},
		{"warmup negative", func(c *Config) { c.Warmup = -time.Second }, "Warmup must be in 0..1m0s"},
		{"warmup zero", func(c *Config) { c.Warmup = 0 }, ""},
		{"settle too long", func(c *Config) { c.Settle = time.Minute }, "Settle must be in 0..10s"},
		{"rate zero", func(c *Config) { c.ProbeRate = 0 }, "ProbeRate (-probe-rate) must be in 1..10000 requests/s, got 0"},
		{"rate NaN", func(c *Config) { c.ProbeRate = math.NaN() }, "ProbeRate (-probe-rate) must be in 1..10000"},
		{"rate too high", func(c *Config) { c.ProbeRate = 20000 }, "ProbeRate (-probe-rate) must be in 1..10000"},
		{"hog zero", func(c *Config) { c.HogConcurrency = 0 }, "HogConcurrency (-hog-c) must be in 1..1000, got 0"},
		{"small rate too high", func(c *Config) { c.SmallRate = 10001 }, "SmallRate (-small-rate) must be in 1..10000 requests/s, got 10001"},
		{"mode with workers", func(c *Config) { c.Modes = []string{"none", "none:1", "reserve:3"} }, ""},
		{"mode with zero workers", func(c *Config) { c.Modes = []string{"none:0"} }, `Modes (-modes): "none:0": the worker count after the colon: cpusched: WithWorkers(0): workers must be in 1..1024`},
		{"mode with bad workers", func(c *Config) { c.Modes = []string{"none:x"} }, `"none:x": the worker count after the colon must be an integer`},
		{"unknown mode with workers", func(c *Config) { c.Modes = []string{"turbo:1"} }, `unknown isolation mode "turbo:1"`},
		{"mode with workers twice", func(c *Config) { c.Modes = []string{"none:1", "none:1"} }, `mode "none:1" given twice`},
		{"quota smallest", func(c *Config) { c.CPUQuota = MinCPUQuota }, ""},
		{"quota all CPUs", func(c *Config) { c.CPUQuota = float64(runtime.NumCPU()) }, ""},
		{"quota too small", func(c *Config) { c.CPUQuota = 0.05 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.." + strconv.Itoa(runtime.NumCPU()) + " CPUs, got 0.05"},
		{"quota negative", func(c *Config) { c.CPUQuota = -1 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.."},
		{"quota too large", func(c *Config) { c.CPUQuota = float64(runtime.NumCPU()) + 0.5 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.."},
		{"quota NaN", func(c *Config) { c.CPUQuota = math.NaN() }, "got NaN"},
		{"trace above", func(c *Config) { c.TraceDir, c.TraceAbove = "t", 3*time.Millisecond }, ""},
		{"trace above without trace", func(c *Config) { c.TraceAbove = 3 * time.Millisecond }, "TraceAbove (-trace-above) 3ms needs TraceDir (-trace DIR)"},
		{"trace above negative", func(c *Config) { c.TraceDir, c.TraceAbove = "t", -time.Millisecond }, "TraceAbove (-trace-above) must be 0 (twice the idle p99) or in 1µs..1m0s, got -1ms"},
		{"trace above too long", func(c *Config) { c.TraceDir, c.TraceAbove = "t", time.Hour }, "in 1µs..1m0s, got 1h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig("cpusched", "serve")
			tt.edit(&cfg)
			err := cfg.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("got error %q, want nil", err)
			case tt.wantErr != "" && err == nil:
				t.Errorf("got nil, want error containing %q", tt.wantErr)
			case tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("got error %q, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestRunInvalidConfigStartsNothing(t *testing.T) {
	cfg := DefaultConfig("/nonexistent/cpusched", "serve")
	cfg.Step = 0
	rep, err := Run(context.Background(), cfg)
	if rep != nil || err == nil {
		t.Errorf("got (%v, %v), want (nil, an error)", rep, err)
	}
}

func TestQuickStep(t *testing.T) {
	tests := []struct {
		modes int
		want  time.Duration
	}{
		{0, 2 * time.Second},
		{1, 2 * time.Second},
		{2, 2 * time.Second},
		{3, time.Second},
		{20, time.Second},
	}
	for _, tt := range tests {
		if got := QuickStep(tt.modes); got != tt.want {
			t.Errorf("QuickStep(%d): got %v, want %v", tt.modes, got, tt.want)
		}
		// A quick run's steps, warm-ups and settling fit in 25 s for up to
		// three modes.
		if tt.modes >= 1 && tt.modes <= 3 {
			total := time.Duration(tt.modes*len(Steps())) * (QuickStep(tt.modes) + QuickWarmup + DefaultSettle)
			if total > 25*time.Second {
				t.Errorf("QuickStep(%d): the steps take %v in all, want <= 25s", tt.modes, total)
			}
		}
	}
}

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

func TestParseListening(t *testing.T) {
	tests := []struct {
		line, url, banner string
		ok                bool
	}{
		{"cpusched serve: listening on http://127.0.0.1:4242 (isolation=none workers=2 gomaxprocs=2)",
			"http://127.0.0.1:4242", "isolation=none workers=2 gomaxprocs=2", true},
		{"listening on http://127.0.0.1:80/", "http://127.0.0.1:80", "", true},
		{"starting up", "", "", false},
		{"listening on 127.0.0.1:80", "", "", false},
	}
	for _, tt := range tests {
		url, banner, ok := parseListening(tt.line)
		if url != tt.url || banner != tt.banner || ok != tt.ok {
			t.Errorf("parseListening(%q): got (%q, %q, %v), want (%q, %q, %v)", tt.line, url, banner, ok, tt.url, tt.banner, tt.ok)
		}
	}
}

func TestCPUModel(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpuinfo")
	os.WriteFile(path, []byte("processor\t: 0\nvendor_id\t: X\nmodel name\t: Test  CPU @ 2.0GHz\n\nprocessor\t: 1\nmodel name\t: other\n"), 0o644)
	if got, want := cpuModel(path), "Test CPU @ 2.0GHz"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := cpuModel(filepath.Join(t.TempDir(), "missing")); got != "" {
		t.Errorf("missing file: got %q, want \"\"", got)
	}
}

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err != nil && !os.IsNotExist(err)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestStopKillsChildThatIgnoresSIGTERM(t *testing.T) {
	defer func(g time.Duration) { stopGrace = g }(stopGrace)
	stopGrace = 300 * time.Millisecond
	// The shell ignores SIGTERM, and so does the sleep it starts in the
	// background (ignored signals stay ignored across exec).
	c, err := startChild("sh", "-c", `trap "" TERM; sleep 60 & echo $!; wait`)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := c.stdout.Read(buf)
	if err != nil {
		c.stop()
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		c.stop()
		t.Fatalf("reading the grandchild's pid from %q: %v", buf[:n], err)
	}
	pid := c.cmd.Process.Pid

	start := time.Now()
	err = c.stop()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stop: got error %v, want one saying it was killed", err)
	}
	if took > 5*time.Second {
		t.Errorf("stop took %v, want it bounded by the grace period plus a little (limit 5s)", took)
	}
	if alive(pid) {
		t.Errorf("child %d: got alive after stop, want gone", pid)
	}
	// The grandchild is reaped by init, not by us: give that a moment.
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(grandchild) {
		t.Errorf("grandchild %d: got alive after stop, want gone", grandchild)
	}
	if err2 := c.stop(); err2 != err {
		t.Errorf("second stop: got %v, want the first result %v", err2, err)
	}
}

func TestStopAfterSIGTERMIsClean(t *testing.T) {
	c, err := startChild("sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.stop(); err != nil {
		t.Errorf("stop of a child that exits on SIGTERM: got %v, want nil", err)
	}
}

func TestStartServerFailures(t *testing.T) {
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 500 * time.Millisecond
	tests := []struct {
		name    string
		script  string
		wantErr []string
	}{
		{"exits", `echo "no such flag -isolation" >&2; exit 2`, []string{"exited before it printed its address", "no such flag -isolation"}},
		{"silent", `echo starting >&2; sleep 60`, []string{`did not print "listening on http://..." within 500ms`, "starting"}},
		{"not answering", `echo "listening on http://127.0.0.1:1 (test)"; sleep 60`, []string{"/stats did not answer 200 within 500ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := startServer(context.Background(), nil, "sh", []string{"-c", tt.script})
			if err == nil {
				srv.stop()
				t.Fatal("got nil error, want one")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got error %q, want it to contain %q", err, want)
				}
			}
		})
	}
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
