package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/fleet"
)

func TestFleetUsageErrors(t *testing.T) {
	verifyNoLeaks(t)
	cpus := strconv.Itoa(runtime.NumCPU())
	for _, tt := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"argument", []string{"now"}, `unexpected argument "now" (fleet takes only flags)`},
		{"one replica", []string{"-replicas", "1"}, "Replicas (-replicas) must be in 2..8, got 1"},
		{"unknown scenario", []string{"-scenarios", "batch,burst"}, `Scenarios (-scenarios): unknown scenario "burst" (valid: quota, batch, neighbor)`},
		{"no scenario", []string{"-scenarios", ","}, "Scenarios (-scenarios): no scenario given"},
		{"unknown policy", []string{"-policies", "pick_first"}, `Policies (-policies): unknown policy "pick_first"`},
		{"policy twice", []string{"-policies", "round_robin,round_robin"}, `policy "round_robin" given twice`},
		{"rate negative", []string{"-quota-rate", "-1"}, "QuotaRate (-quota-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got -1"},
		{"rate NaN", []string{"-batch-rate", "NaN"}, "BatchRate (-batch-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got NaN"},
		{"neighbor rate", []string{"-neighbor-rate", "6000"}, "NeighborRate (-neighbor-rate) must be 0 (scaled to this machine) or in 1..5000 calls/s, got 6000"},
		{"weak cpu", []string{"-weak-cpu", "0.05"}, "WeakCPU (-weak-cpu) must be in 0.1.." + cpus + " CPUs, got 0.05"},
		{"cpu above the CPUs", []string{"-cpu", strconv.Itoa(runtime.NumCPU() + 1)}, "CPU (-cpu) must be in 0.1.." + cpus + " CPUs"},
		{"duration", []string{"-duration", "100ms"}, "Duration (-duration) must be in 500ms..10m0s, got 100ms"},
		{"rounds zero", []string{"-rounds", "0"}, "Rounds (-rounds) must be in 1..20, got 0"},
		{"rounds many", []string{"-rounds", "21"}, "Rounds (-rounds) must be in 1..20, got 21"},
		{"segments too short", []string{"-duration", "1s", "-rounds", "3"}, "Duration (-duration) 1s over Rounds (-rounds) 3 is a segment of 333.333333ms: each must be at least 500ms"},
		{"quick segments too short", []string{"-quick", "-rounds", "10"}, "Duration (-duration) 3s over Rounds (-rounds) 10 is a segment of 300ms: each must be at least 500ms"},
		{"arrivals", []string{"-arrivals", "bursty"}, `Arrivals (-arrivals) must be one of fixed, poisson, got "bursty"`},
		{"duration with quick", []string{"-quick", "-duration", "11m"}, "Duration (-duration) must be in 500ms..10m0s, got 11m0s"},
		{"warmup", []string{"-warmup", "-1s"}, "Warmup (-warmup) must be in 0..1m0s, got -1s"},
		{"timeout", []string{"-timeout", "1ms"}, "Timeout (-timeout) must be in 10ms..1m0s, got 1ms"},
		{"no call", []string{"-batch-rate", "1", "-duration", "500ms", "-rounds", "1"}, "the batch scenario's rate 1 calls/s over a segment of 500ms (Duration (-duration) over Rounds (-rounds)) makes no call"},
		{"not a duration", []string{"-duration", "soon"}, `invalid value "soon" for flag -duration`},
		{"medians of one run", []string{"-medians", "run1.json"}, "-medians: medians take 2..20 runs, got 1"},
		{"medians of no file", []string{"-medians", "no-run1.json,no-run2.json"}, "-medians: open no-run1.json: no such file or directory"},
		{"json in no directory", []string{"-quick", "-json", "no-such-dir/r.json"}, "-json no-such-dir/r.json: cannot be written"},
		{"out under a file", []string{"-quick", "-out", "fleet_test.go/out"}, "-out fleet_test.go/out: cannot be made"},
		{"medians with a run's flag", []string{"-quick", "-medians", "a.json,b.json"}, "-medians reads earlier runs and takes no flag of a run but -json; got -quick"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"fleet"}, tt.args...), tt.wantErr)
		})
	}
}

// TestFleetNothingToRun: when no scenario asked for can run here (the
// quota scenario without cgroups), fleet exits with a usage error that
// says why.
func TestFleetNothingToRun(t *testing.T) {
	defer func(run func(context.Context, fleet.Config) error) { fleetRun = run }(fleetRun)
	fleetRun = func(context.Context, fleet.Config) error {
		return fmt.Errorf("fleet: %w: quota: cannot run the servers under a CPU quota: permission denied", fleet.ErrNothingToRun)
	}
	checkUsageError(t, []string{"fleet", "-scenarios", "quota"},
		"cpusched fleet: -scenarios quota: no scenario can run here: quota: cannot run the servers under a CPU quota: permission denied\n")
}

// TestFleetQuick: -quick shortens the rows unless -duration, -warmup or
// -rounds is given.
func TestFleetQuick(t *testing.T) {
	defer func(run func(context.Context, fleet.Config) error) { fleetRun = run }(fleetRun)
	var got fleet.Config
	fleetRun = func(_ context.Context, cfg fleet.Config) error {
		got = cfg
		return nil
	}
	for _, tt := range []struct {
		args             []string
		duration, warmup time.Duration
		rounds           int
	}{
		{nil, fleet.DefaultDuration, fleet.DefaultWarmup, fleet.DefaultRounds},
		{[]string{"-quick"}, fleet.QuickDuration, fleet.QuickWarmup, fleet.QuickRounds},
		{[]string{"-quick", "-duration", "2s"}, 2 * time.Second, fleet.QuickWarmup, fleet.QuickRounds},
		{[]string{"-quick", "-warmup", "0s"}, fleet.QuickDuration, 0, fleet.QuickRounds},
		{[]string{"-quick", "-rounds", "1"}, fleet.QuickDuration, fleet.QuickWarmup, 1},
		{[]string{"-rounds", "3", "-arrivals", "fixed"}, fleet.DefaultDuration, fleet.DefaultWarmup, 3},
	} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), append([]string{"fleet"}, tt.args...), &stdout, &stderr); code != 0 {
			t.Fatalf("fleet %q: exit %d, %s", tt.args, code, stderr.String())
		}
		if got.Duration != tt.duration || got.Warmup != tt.warmup || got.Rounds != tt.rounds {
			t.Errorf("fleet %q: duration %v, warmup %v, rounds %d; want %v, %v, %d", tt.args, got.Duration, got.Warmup, got.Rounds, tt.duration, tt.warmup, tt.rounds)
		}
	}
}

// TestFleetEndToEnd runs a very short fleet for real (the batch scenario,
// two replicas of this test binary, a tiny rate, two rounds) and checks
// its JSON: each row merges its two segments.
func TestFleetEndToEnd(t *testing.T) {
	verifyNoLeaks(t)
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "fleet.json")
	var stdout, stderr bytes.Buffer
	args := []string{"fleet", "-scenarios", "batch", "-policies", "round_robin,weighted_round_robin", "-replicas", "2",
		"-batch-rate", "40", "-warmup", "300ms", "-duration", "1s", "-rounds", "2", "-arrivals", "fixed", "-json", jsonPath, "-out", dir}
	if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("cpusched %q: exit %d, stderr %s", args, code, stderr.String())
	}
	for _, want := range []string{"batch     round_robin", "weighted_round_robin", "targets:", "wrote "} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, stdout.String())
		}
	}
	for _, f := range []string{fleet.JSONFile, fleet.P99Plot, fleet.SharePlot} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Error(err)
		}
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Scenario string  `json:"scenario"`
			Policy   string  `json:"policy"`
			P50Ms    float64 `json:"p50_ms"`
			P99Ms    float64 `json:"p99_ms"`
			Errors   int64   `json:"errors"`
			Calls    int64   `json:"calls"`
			Rounds   int     `json:"rounds"`
			Replicas []struct {
				Share    float64 `json:"share"`
				CPULimit float64 `json:"cpu_limit"`
				Batch    bool    `json:"batch"`
				Calls    int64   `json:"calls"`
			} `json:"replicas"`
			Methods []struct {
				Method string `json:"method"`
			} `json:"methods"`
		} `json:"results"`
		Targets []struct {
			Scenario string `json:"scenario"`
		} `json:"targets"`
	}
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Results) != 2 || rep.Results[0].Policy != fleet.PolicyRoundRobin || rep.Results[1].Policy != fleet.PolicyWRR {
		t.Fatalf("results %+v: want round_robin and weighted_round_robin", rep.Results)
	}
	for _, r := range rep.Results {
		if r.Scenario != fleet.ScenarioBatch || r.Calls != 40 || r.Rounds != 2 || r.Errors != 0 || !(r.P50Ms > 0 && r.P99Ms >= r.P50Ms) {
			t.Errorf("%s: scenario %s, %d calls in %d rounds, %d errors, p50 %v, p99 %v; want batch, 40 calls (40/s over 1 s) in 2, no errors, 0 < p50 <= p99",
				r.Policy, r.Scenario, r.Calls, r.Rounds, r.Errors, r.P50Ms, r.P99Ms)
		}
		if len(r.Replicas) != 2 || !r.Replicas[0].Batch || r.Replicas[1].Batch || r.Replicas[0].CPULimit != 0 {
			t.Fatalf("%s: replicas %+v: want two, the first with the batch job, no CPU limit", r.Policy, r.Replicas)
		}
		if sum := r.Replicas[0].Share + r.Replicas[1].Share; math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: shares sum to %v", r.Policy, sum)
		}
		if len(r.Methods) != 3 || r.Methods[0].Method != fleet.MethodHeavy {
			t.Errorf("%s: methods %+v", r.Policy, r.Methods)
		}
	}
	// round_robin picks among the connections that are ready: on a loaded
	// machine the second may be ready only after the 300 ms warm-up, and
	// a call or two of the window goes to the first.
	if rr := rep.Results[0].Replicas; rr[0].Calls+rr[1].Calls != 40 || rr[0].Calls < 17 || rr[1].Calls < 17 {
		t.Errorf("round_robin's calls %d and %d, want 40 split 20:20 within 3", rr[0].Calls, rr[1].Calls)
	}
	if len(rep.Targets) != 2 {
		t.Errorf("targets %+v: want batch's two that compare round_robin and weighted_round_robin", rep.Targets)
	}

	// -medians reads the run back, here twice, as the rows of two runs.
	stdout.Reset()
	mediansJSON := filepath.Join(dir, "medians.json")
	args = []string{"fleet", "-medians", jsonPath + "," + jsonPath, "-json", mediansJSON}
	if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("cpusched %q: exit %d, stderr %s", args, code, stderr.String())
	}
	for _, want := range []string{"medians of 2 runs", "p99 run 2", "targets, on the medians of the runs' ratios:", "batch: weighted_round_robin p99 <= 1.1x round_robin's"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("-medians's output lacks %q:\n%s", want, stdout.String())
		}
	}
	var m fleet.Medians
	if data, err := os.ReadFile(mediansJSON); err != nil {
		t.Error(err)
	} else if err := json.Unmarshal(data, &m); err != nil || len(m.Rows) != 2 || len(m.Targets) != 2 || m.Rows[0].MedianP99Ms != rep.Results[0].P99Ms {
		t.Errorf("-medians's JSON: %v, %+v: want round_robin's and weighted_round_robin's rows, each run's p99 its median", err, m)
	}
}

// FuzzFleetArgs: `cpusched fleet` with random arguments exits 2 with a
// message naming the bad flag, or, for a valid command line, 1 saying it
// was interrupted (it starts nothing once its context is done). Inputs
// that mention an output file are skipped: a fuzz input must not write
// files.
func FuzzFleetArgs(f *testing.F) {
	for _, args := range []string{"", "-quick", "-replicas\n1", "-replicas\n9", "-scenarios\nquota,quota", "-scenarios\nburst",
		"-policies\n", "-policies\nround_robin,weighted_round_robin_cpu", "-quota-rate\n-3", "-batch-rate\nInf", "-weak-cpu\n0",
		"-cpu\n-1", "-duration\n0s", "-quick\n-duration\n0s", "-warmup\n2m", "-timeout\n0s", "now", "-bogus", "-h",
		"-batch-rate\n1\n-duration\n900ms", "-neighbor-rate\n-1", "-rounds\n0", "-rounds\n3\n-duration\n1s", "-arrivals\nfixed", "-arrivals\nx"} {
		f.Add(args)
	}
	flags := flagMention(f, "fleet")
	f.Fuzz(func(t *testing.T, input string) {
		if strings.Contains(input, "out") || strings.Contains(input, "json") {
			return
		}
		code, last := fuzzCommand(t, "fleet", flags, fuzzArgs(input), 0, 1, 2)
		if code == 1 && last != "cpusched fleet: interrupted" {
			t.Fatalf("cpusched fleet %q: exit 1 with %q, want \"interrupted\" (its context was cancelled)", fuzzArgs(input), last)
		}
	})
}

// TestFleetListed: help lists fleet and hides its replica command.
func TestFleetListed(t *testing.T) {
	var stdout, stderr bytes.Buffer
	dispatch(context.Background(), []string{"help"}, &stdout, &stderr)
	if !strings.Contains(stderr.String(), "  fleet ") || strings.Contains(stderr.String(), fleet.ReplicaCommand) {
		t.Errorf("help: %q, want fleet listed and %s hidden", stderr.String(), fleet.ReplicaCommand)
	}
}
