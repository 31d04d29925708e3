package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/cmd/internal/soak"
)

func TestSoakUsageErrors(t *testing.T) {
	verifyNoLeaks(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"argument", []string{"now"}, `unexpected argument "now"`},
		{"too short", []string{"-d", "9s"}, "Duration (-d) must be in 10s..24h, got 9s"},
		{"too long", []string{"-d", "25h"}, "Duration (-d) must be in 10s..24h, got 25h0m0s"},
		{"zero", []string{"-duration", "0s"}, "Duration (-d) must be in 10s..24h, got 0s"},
		{"negative", []string{"-d", "-1m"}, "Duration (-d) must be in 10s..24h, got -1m0s"},
		{"not a duration", []string{"-d", "ten"}, `invalid value "ten" for flag -d`},
		{"json in no directory", []string{"-json", "no-such-dir/r.json"}, "-json no-such-dir/r.json: cannot be written"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"soak"}, tt.args...), tt.wantErr)
		})
	}
}

func TestSoakHelpStatesTheRule(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := dispatch(context.Background(), []string{"soak", "-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("soak -h: got exit %d, want 0", code)
	}
	for _, want := range []string{"usage: cpusched soak", "Pass rule: the run is cut into 10 equal windows", "-d duration", "-json"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("soak -h: got %q, want it to contain %q", stderr.String(), want)
		}
	}
}

func TestSoakOutputs(t *testing.T) {
	rep := &soak.Report{
		Server:  "isolation=none workers=2 gomaxprocs=2",
		Samples: []soak.Sample{{T: 1, RSSBytes: 20 << 20, Goroutines: 15, Threads: 10, FDs: 12, MetricsBytes: 32 << 10, Groups: 2}},
		Checks:  []soak.Check{{Name: "rss", Pass: true, Detail: "fine"}},
		Pass:    true,
	}
	jsonPath := filepath.Join(t.TempDir(), "soak.json")
	var stdout bytes.Buffer
	if err := writeSoakOutputs(rep, jsonPath, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "verdict: PASS") {
		t.Errorf("stdout: got %q, want the table and the verdict", stdout.String())
	}
	data, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var got soak.Report
	if err := json.Unmarshal(data, &got); err != nil || len(got.Samples) != 1 || !got.Pass {
		t.Errorf("%s: got %+v (err %v), want the report", jsonPath, got, err)
	}

	// -json - writes JSON, not the table, to stdout.
	stdout.Reset()
	if err := writeSoakOutputs(rep, "-", &stdout); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(stdout.Bytes()) {
		t.Errorf("-json -: got %q, want only JSON on stdout", stdout.String())
	}
}
