package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/demo"
)

func TestBenchUsageErrors(t *testing.T) {
	verifyNoLeaks(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"argument", []string{"now"}, `unexpected argument "now"`},
		{"unknown mode", []string{"-modes", "none,turbo"}, `Modes (-modes): unknown mode "turbo" (valid: floor, none, reserve`},
		{"floor with workers", []string{"-modes", "floor:1"}, `Modes (-modes): "floor:1": the floor has no scheduler, so no worker count`},
		{"io zero", []string{"-io-c", "0"}, "IOConcurrency (-io-c) must be in 1..1000 connections, got 0"},
		{"io too many", []string{"-io-c", "1001"}, "IOConcurrency (-io-c) must be in 1..1000 connections, got 1001"},
		{"mode twice", []string{"-modes", "none,none"}, `mode "none" given twice`},
		{"step zero", []string{"-step", "0s"}, "Step (-step) must be in 100ms..10m0s, got 0s"},
		{"step zero with quick", []string{"-quick", "-step", "0s"}, "Step (-step) must be in 100ms..10m0s"},
		{"rate zero", []string{"-probe-rate", "0"}, "ProbeRate (-probe-rate) must be in 1..10000"},
		{"hog zero", []string{"-hog-c", "0"}, "HogConcurrency (-hog-c) must be in 1..1000, got 0"},
		{"small rate too high", []string{"-small-rate", "20000"}, "SmallRate (-small-rate) must be in 1..10000 requests/s, got 20000"},
		{"mode with zero workers", []string{"-modes", "ospriority:0"}, `Modes (-modes): "ospriority:0": the worker count after the colon: cpusched: WithWorkers(0): workers must be in 1..1024`},
		{"quota too small", []string{"-cpu-quota", "0.01"}, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.." + strconv.Itoa(runtime.NumCPU()) + " CPUs, got 0.01"},
		{"quota above the CPUs", []string{"-cpu-quota", strconv.Itoa(runtime.NumCPU() + 1)}, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.."},
		{"quota negative", []string{"-cpu-quota", "-1"}, "CPUQuota (-cpu-quota) must be 0 (no quota)"},
		{"quota NaN", []string{"-cpu-quota", "NaN"}, "got NaN"},
		{"quota not a number", []string{"-cpu-quota", "half"}, `invalid value "half" for flag -cpu-quota`},
		{"trace-above without -trace", []string{"-trace-above", "3ms"}, "TraceAbove (-trace-above) 3ms needs TraceDir (-trace DIR)"},
		{"trace-above negative", []string{"-trace", "t", "-trace-above", "-1ms"}, "TraceAbove (-trace-above) must be 0 (the default: twice the idle p99, for io-heavy twice the floor's) or in 1µs..1m0s, got -1ms"},
		{"clean and gc", []string{"-clean", "-gc"}, "-clean and -gc: give one of them (default: 32 KiB of garbage per fast request)"},
		{"server-procs negative", []string{"-server-procs", "-1"}, "ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1.." + strconv.Itoa(runtime.NumCPU()) + ", got -1"},
		{"server-procs above the CPUs", []string{"-server-procs", strconv.Itoa(runtime.NumCPU() + 1)}, "ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1.." + strconv.Itoa(runtime.NumCPU()) + ", got " + strconv.Itoa(runtime.NumCPU()+1)},
		{"server-procs not a number", []string{"-server-procs", "one"}, `invalid value "one" for flag -server-procs`},
		{"cpuset is a switch", []string{"-cpuset=0,1"}, `invalid boolean value "0,1" for -cpuset`},
		{"neighbor-c zero", []string{"-neighbor-c", "0"}, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 0"},
		{"neighbor-c too many", []string{"-neighbor-c", "1000"}, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 1000"},
		{"unknown step", []string{"-steps", "neighbor,hog"}, `Steps (-steps): unknown step "hog" (valid: idle, hog-direct, hog-sched, hog-nockpt, hog-sched+small, io-heavy, neighbor-alone, neighbor, neighbor-nockpt, tenants, auto)`},
		{"step twice", []string{"-steps", "idle,idle"}, `Steps (-steps): step "idle" given twice`},
		{"tenant weights too few", []string{"-tenant-weights", "300:100"}, "-tenant-weights: want 4 weights joined by ':' (one per group: 300:100:100:25), got 2"},
		{"tenant weight out of range", []string{"-tenant-weights", "300:100:100:0"}, `-tenant-weights: weight "0" of group t4: want an integer in 1..10000`},
		{"floor's step without the floor", []string{"-modes", "reserve", "-steps", "neighbor-alone"}, "Steps (-steps) neighbor-alone: no mode of -modes (reserve) has any of them"},
		// Found before the run, which writes them only at its end.
		{"json in no directory", []string{"-json", "no-such-dir/r.json"}, "-json no-such-dir/r.json: cannot be written, so the results would be lost at the end of the run: no such file or directory"},
		{"json a directory", []string{"-json", "."}, "-json .: is a directory"},
		{"out under a file", []string{"-out", "bench_test.go/out"}, "-out bench_test.go/out: cannot be made"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"bench"}, tt.args...), tt.wantErr)
		})
	}
}

// TestBenchCgroupsUnavailable: when bench.Run finds that the servers
// cannot run under the quota (-cpu-quota), or in cgroups of their own
// (-cgroups), here (no cgroups, not root), bench exits with a usage error
// that says why, and measures nothing.
func TestBenchCgroupsUnavailable(t *testing.T) {
	defer func(run func(context.Context, bench.Config) (*bench.Report, error)) { benchRun = run }(benchRun)
	tests := []struct {
		args    []string
		runErr  error
		wantErr string
		check   func(bench.Config) bool
	}{
		{[]string{"-cpu-quota", "1.5"}, bench.ErrCPUQuota,
			"cpusched bench: -cpu-quota 1.5: cannot run the servers under a CPU quota: cgroup v2 /sys/fs/cgroup: creating the cgroup: permission denied\n",
			func(c bench.Config) bool { return c.CPUQuota == 1.5 }},
		{[]string{"-cgroups"}, bench.ErrCgroups,
			"cpusched bench: -cgroups: cannot run the server and the neighbour in cgroups of their own: cgroup v2 /sys/fs/cgroup: creating the cgroup: permission denied\n",
			func(c bench.Config) bool { return c.Cgroups }},
	}
	for _, tt := range tests {
		var got bench.Config
		benchRun = func(_ context.Context, cfg bench.Config) (*bench.Report, error) {
			got = cfg
			return nil, fmt.Errorf("bench: %w: cgroup v2 /sys/fs/cgroup: creating the cgroup: permission denied", tt.runErr)
		}
		checkUsageError(t, append([]string{"bench"}, tt.args...), tt.wantErr)
		if !tt.check(got) {
			t.Errorf("bench %q: bench.Run got %+v, want the flag in it", tt.args, got)
		}
	}
}

// TestBenchPrivilegedNotRoot: -privileged in a bench that is not root is
// a usage error that says so.
func TestBenchPrivilegedNotRoot(t *testing.T) {
	defer func(run func(context.Context, bench.Config) (*bench.Report, error)) { benchRun = run }(benchRun)
	benchRun = func(context.Context, bench.Config) (*bench.Report, error) {
		return nil, fmt.Errorf("bench: %w (uid 1000)", bench.ErrPrivileged)
	}
	checkUsageError(t, []string{"bench", "-privileged"}, "cpusched bench: -privileged: cannot run the servers privileged: the bench is not root (uid 1000)\n")
}

// TestBenchConfig: the flags reach bench.Run's Config: the garbage of
// -clean, -gc and neither, -steps, -neighbor-c (and its default under
// -cpuset), -server-procs, and -quick's step over the steps asked for.
func TestBenchConfig(t *testing.T) {
	defer func(run func(context.Context, bench.Config) (*bench.Report, error)) { benchRun = run }(benchRun)
	var got bench.Config
	benchRun = func(_ context.Context, cfg bench.Config) (*bench.Report, error) {
		got = cfg
		return nil, errors.New("bench: not run in this test")
	}
	type configCase struct {
		args  []string
		check func(bench.Config) bool
	}
	tests := []configCase{
		{nil, func(c bench.Config) bool {
			return c.Garbage == demo.DefaultGarbage && c.NeighborConcurrency == runtime.NumCPU() && c.Steps == nil && !c.Cgroups
		}},
		{[]string{"-clean"}, func(c bench.Config) bool { return c.Garbage == 0 }},
		{[]string{"-gc"}, func(c bench.Config) bool { return c.Garbage == demo.HeavyGarbage }},
		{[]string{"-neighbor-c", "3", "-cgroups"}, func(c bench.Config) bool { return c.NeighborConcurrency == 3 && c.Cgroups && !c.Privileged }},
		{[]string{"-privileged"}, func(c bench.Config) bool { return c.Privileged }},
		{[]string{"-server-procs", "1", "-neighbor-c", "1"}, func(c bench.Config) bool {
			return c.ServerProcs == 1 && c.NeighborConcurrency == 1 && !c.CPUSet
		}},
		{[]string{"-quick", "-modes", "floor,ospriority,reserve", "-steps", "neighbor"}, func(c bench.Config) bool {
			return slices.Equal(c.Steps, []string{"neighbor"}) && c.Step == 2*time.Second && c.Quick
		}},
		{[]string{"-steps", "tenants", "-tenant-weights", "400:200:100:50"}, func(c bench.Config) bool {
			return slices.Equal(c.Steps, []string{"tenants"}) && bench.TenantWeights(c.Tenants) == "400:200:100:50"
		}},
		{nil, func(c bench.Config) bool { return bench.TenantWeights(c.Tenants) == "300:100:100:25" }},
	}
	if _, others, err := bench.CPUSetHalves(); err == nil {
		// -cpuset: the neighbour's threads default to one per CPU of its
		// half; -neighbor-c still sets them.
		tests = append(tests,
			configCase{[]string{"-cpuset"}, func(c bench.Config) bool { return c.CPUSet && c.NeighborConcurrency == len(others) }},
			configCase{[]string{"-cpuset", "-neighbor-c", "3"}, func(c bench.Config) bool { return c.CPUSet && c.NeighborConcurrency == 3 }})
	}
	for _, tt := range tests {
		got = bench.Config{}
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), append([]string{"bench"}, tt.args...), &stdout, &stderr); code != 1 || !tt.check(got) {
			t.Errorf("bench %q: got exit %d (stderr %q), config %+v; want 1 (not run) and the flags in the config", tt.args, code, stderr.String(), got)
		}
	}
}

func TestBenchOutputs(t *testing.T) {
	v := 50.0
	rep := &bench.Report{
		Machine: bench.Machine{CPU: "Test CPU", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26", OS: "linux/amd64"},
		Config:  bench.ReportConfig{StepS: 1, ProbeRate: 200, HogConcurrency: 10, SmallRate: 200, Modes: []string{"none"}},
		Results: []bench.Result{
			{Mode: "none", Step: bench.StepIdle, Probe: &bench.ProbeResult{RPS: 200, P50Ms: 1, P99Ms: 2, P999Ms: 3, MaxMs: 4}},
			{Mode: "none", Step: bench.StepHogSched, Probe: &bench.ProbeResult{RPS: 200, P50Ms: 1, P99Ms: 5, P999Ms: 6, MaxMs: 7},
				Hog: &bench.HogResult{PassesPerS: 1000, PctOfDirect: &v}},
		},
	}
	dir := filepath.Join(t.TempDir(), "out")
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout bytes.Buffer
	if err := writeBenchOutputs(rep, jsonPath, dir, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "none  hog-sched") || !strings.Contains(stdout.String(), "wrote "+dir) {
		t.Errorf("stdout: got %q, want the table and the files written", stdout.String())
	}
	for _, p := range []string{jsonPath, filepath.Join(dir, "bench.json")} {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var got bench.Report
		if err := json.Unmarshal(data, &got); err != nil || len(got.Results) != 2 {
			t.Errorf("%s: got %d results (err %v), want 2", p, len(got.Results), err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "bench.png")); err != nil || fi.Size() == 0 {
		t.Errorf("bench.png: got %v, want a non-empty file", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "frontier.png")); err == nil || !strings.Contains(stdout.String(), "no frontier plot") {
		t.Errorf("frontier.png of a run without the floor: stat error %v, stdout %q; want no file, and a line saying why", err, stdout.String())
	}

	// -json - writes JSON, not the table, to stdout.
	stdout.Reset()
	if err := writeBenchOutputs(rep, "-", "", &stdout); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(stdout.Bytes()) {
		t.Errorf("-json -: got %q, want only JSON on stdout", stdout.String())
	}
}

// TestBenchCPUSetEndToEnd runs `bench -quick -cpuset -modes
// floor,ospriority -steps idle` for real, its servers this test binary
// (TestMain), with shorter steps: the header and the JSON say the shape,
// with the CPUs of each half, and ospriority's row has its contended
// share.
func TestBenchCPUSetEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	server, others, err := bench.CPUSetHalves()
	if err != nil {
		t.Skipf("no CPUs to split: %v", err)
	}
	verifyNoLeaks(t)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-quick", "-cpuset", "-modes", "floor,ospriority", "-steps", "idle", "-step", "600ms", "-out", dir}
	if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("cpusched %q: exit %d, stderr %s", args, code, stderr.String())
	}
	want := fmt.Sprintf("shape:   cpuset: the servers and the floor's hog on CPU %s, bench (the load generator) and the neighbour on CPU %s", bench.FormatCPUs(server), bench.FormatCPUs(others))
	if !strings.Contains(stdout.String(), want) {
		t.Errorf("the header lacks %q:\n%s", want, stdout.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep bench.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	wantShape := bench.ReportShape{Name: bench.ShapeCPUSet, ServerCPUs: bench.FormatCPUs(server), OtherCPUs: bench.FormatCPUs(others)}
	if rep.Config.Shape != wantShape || rep.Config.NeighborConcurrency != len(others) {
		t.Errorf("config: got shape %+v, neighbour %d threads; want %+v, %d", rep.Config.Shape, rep.Config.NeighborConcurrency, wantShape, len(others))
	}
	var rows []string
	for _, r := range rep.Results {
		rows = append(rows, r.Mode+"/"+r.Step)
		if r.Mode == "ospriority" && r.ContendedPct == nil {
			t.Errorf("%s/%s: no contended share", r.Mode, r.Step)
		}
	}
	if !slices.Equal(rows, []string{"floor/idle", "ospriority/idle"}) {
		t.Errorf("got rows %v, want floor/idle and ospriority/idle", rows)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.png")); err != nil {
		t.Error(err)
	}
}
