package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/internal/bench"
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
		{"unknown mode", []string{"-modes", "none,turbo"}, `Modes (-modes): unknown isolation mode "turbo"`},
		{"mode twice", []string{"-modes", "none,none"}, `mode "none" given twice`},
		{"step zero", []string{"-step", "0s"}, "Step (-step) must be in 100ms..10m0s, got 0s"},
		{"step zero with quick", []string{"-quick", "-step", "0s"}, "Step (-step) must be in 100ms..10m0s"},
		{"rate zero", []string{"-probe-rate", "0"}, "ProbeRate (-probe-rate) must be in 1..10000"},
		{"hog zero", []string{"-hog-c", "0"}, "HogConcurrency (-hog-c) must be in 1..1000, got 0"},
		{"small too many", []string{"-small-c", "5000"}, "SmallConcurrency (-small-c) must be in 1..1000, got 5000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"bench"}, tt.args...), tt.wantErr)
		})
	}
}

func TestSplitModes(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"none,reserve", []string{"none", "reserve"}},
		{" none , reserve ,", []string{"none", "reserve"}},
		{"", nil},
	}
	for _, tt := range tests {
		if got := splitModes(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("splitModes(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBenchOutputs(t *testing.T) {
	v := 50.0
	rep := &bench.Report{
		Machine: bench.Machine{CPU: "Test CPU", CPUs: 2, GOMAXPROCS: 2, Go: "go1.26", OS: "linux/amd64"},
		Config:  bench.ReportConfig{StepS: 1, ProbeRate: 200, HogConcurrency: 10, SmallConcurrency: 4, Modes: []string{"none"}},
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

	// -json - writes JSON, not the table, to stdout.
	stdout.Reset()
	if err := writeBenchOutputs(rep, "-", "", &stdout); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(stdout.Bytes()) {
		t.Errorf("-json -: got %q, want only JSON on stdout", stdout.String())
	}
}
