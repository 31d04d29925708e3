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
		{"neighbor-c zero", []string{"-neighbor-c", "0"}, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 0"},
		{"neighbor-c too many", []string{"-neighbor-c", "1000"}, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 1000"},
		{"unknown step", []string{"-steps", "neighbor,hog"}, `Steps (-steps): unknown step "hog" (valid: idle, hog-direct, hog-sched, hog-nockpt, hog-sched+small, io-heavy, neighbor-alone, neighbor)`},
		{"step twice", []string{"-steps", "idle,idle"}, `Steps (-steps): step "idle" given twice`},
		{"floor's step without the floor", []string{"-modes", "reserve", "-steps", "neighbor-alone"}, "Steps (-steps) neighbor-alone: no mode of -modes (reserve) has any of them"},
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
// -clean, -gc and neither, -steps, -neighbor-c, and -quick's step over the
// steps asked for.
func TestBenchConfig(t *testing.T) {
	defer func(run func(context.Context, bench.Config) (*bench.Report, error)) { benchRun = run }(benchRun)
	var got bench.Config
	benchRun = func(_ context.Context, cfg bench.Config) (*bench.Report, error) {
		got = cfg
		return nil, errors.New("bench: not run in this test")
	}
	tests := []struct {
		args  []string
		check func(bench.Config) bool
	}{
		{nil, func(c bench.Config) bool {
			return c.Garbage == demo.DefaultGarbage && c.NeighborConcurrency == runtime.NumCPU() && c.Steps == nil && !c.Cgroups
		}},
		{[]string{"-clean"}, func(c bench.Config) bool { return c.Garbage == 0 }},
		{[]string{"-gc"}, func(c bench.Config) bool { return c.Garbage == demo.HeavyGarbage }},
		{[]string{"-neighbor-c", "3", "-cgroups"}, func(c bench.Config) bool { return c.NeighborConcurrency == 3 && c.Cgroups && !c.Privileged }},
		{[]string{"-privileged"}, func(c bench.Config) bool { return c.Privileged }},
		{[]string{"-quick", "-modes", "floor,ospriority,reserve", "-steps", "neighbor"}, func(c bench.Config) bool {
			return slices.Equal(c.Steps, []string{"neighbor"}) && c.Step == 2*time.Second && c.Quick
		}},
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
