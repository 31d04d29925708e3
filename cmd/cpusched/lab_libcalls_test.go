package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/cmd/internal/lab/libcalls"
)

func TestLabLibcallsUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-runs", "0"}, "-runs must be in 1..20, got 0"},
		{[]string{"-runs", "x"}, "invalid value"},
		{[]string{"-kinds", ""}, "-kinds must not be empty (valid: gzip, bcrypt)"},
		{[]string{"-kinds", "gzip,zstd"}, `-kinds: unknown kind "zstd" (valid: gzip, bcrypt)`},
		{[]string{"-clients", "0"}, "-clients must be in 1..256, got 0"},
		{[]string{"-rate", "-1"}, "-rate must be in (0, 10000] requests/s, got -1"},
		{[]string{"-window", "10ms"}, "-window must be in 200ms..10m0s, got 10ms"},
		{[]string{"-warmup", "2m"}, "-warmup must be in 0s..1m0s, got 2m0s"},
		{[]string{"-cost", "3"}, "-cost must be in 4..16, got 3"},
		{[]string{"-cost", "31"}, "-cost must be in 4..16, got 31"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		checkUsageError(t, append([]string{"lab", "libcalls"}, tt.args...), tt.want)
	}
	if os.Geteuid() != 0 {
		checkUsageError(t, []string{"lab", "libcalls", "-privileged"}, "-privileged keeps root's privileges")
	}
	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{{"lab-child", "libcalls"}, {"lab-child", "libcalls", "serve", "-cost", "99"}, {"lab-child", "libcalls", "serve", "-floor", "-auto"}} {
		if code := dispatch(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: got exit %d, want 2", args, code)
		}
	}
}

// TestLabLibcallsQuick runs the whole experiment, servers, auto and floor
// included (as uid 65534 when the test runs as root), in short windows
// with cheap calls, and checks the document's shape, not its figures.
func TestLabLibcallsQuick(t *testing.T) {
	verifyNoLeaks(t)
	var stdout, stderr bytes.Buffer
	args := []string{"lab", "libcalls", "-quick", "-window", "300ms", "-warmup", "200ms", "-clients", "1", "-cost", "4", "-json", "-"}
	if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr.String())
	}
	var doc struct {
		Runs    int                   `json:"runs"`
		Server  string                `json:"server"`
		Results []libcalls.RunResult  `json:"results"`
		Medians []libcalls.StepMedian `json:"medians"`
		Targets []libcalls.Target     `json:"targets"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if doc.Runs != 1 || len(doc.Results) != 1 || doc.Server == "" || len(doc.Targets) != 4 {
		t.Fatalf("got %d runs (%d results), server %q, %d targets; want 1 run of -quick, a server and 4 targets",
			doc.Runs, len(doc.Results), doc.Server, len(doc.Targets))
	}
	r := doc.Results[0]
	want := []string{libcalls.StepIdle, libcalls.StepDirect, libcalls.StepSched, libcalls.StepAuto}
	if r.FloorSkipped == "" {
		want = append(want, libcalls.StepFloor)
	}
	if len(r.Steps) != len(want) || len(doc.Medians) != len(want) {
		t.Fatalf("got %d steps and %d medians, want %v (floor skipped: %q)", len(r.Steps), len(doc.Medians), want, r.FloorSkipped)
	}
	for i, s := range r.Steps {
		if s.Step != want[i] || s.Probe.Completed == 0 {
			t.Errorf("step %d: got %s with %d probe responses, want %s with some", i, s.Step, s.Probe.Completed, want[i])
		}
		if s.Step == libcalls.StepDirect || s.Step == libcalls.StepSched || s.Step == libcalls.StepAuto {
			for _, kind := range libcalls.Kinds {
				if k := s.Kind(kind); k == nil || k.Calls <= 0 || k.Failed != 0 {
					t.Errorf("step %s: got %s %+v, want calls in the window and none failed", s.Step, kind, k)
				}
			}
		}
	}
	if r.Server.Isolation == "" || (r.Floor != nil && r.Floor.IdleThreads == 0) || r.Auto == nil || r.Auto.Isolation == "" {
		t.Errorf("got server %+v, auto %+v, floor %+v; want isolation modes and the floor's lowered threads", r.Server, r.Auto, r.Floor)
	}
	if a := r.Step(libcalls.StepAuto); a != nil && a.P99XSched <= 0 {
		t.Errorf("auto step: got p99 x sched %v, want a ratio", a.P99XSched)
	}
	if a := r.Step(libcalls.StepAuto); a != nil && runtime.GOOS == "linux" {
		// A gzip of 2 MiB takes tens of milliseconds of CPU: heavy from its
		// second request, the warm-up's.
		var gzip *libcalls.AutoRoute
		for i := range a.Routes {
			if a.Routes[i].Route == "GET /direct/gzip" {
				gzip = &a.Routes[i]
			}
		}
		if gzip == nil || !gzip.Heavy || gzip.CPUMs <= 0 {
			t.Errorf("auto step: got gzip's route %+v of %+v, want it heavy with its CPU", gzip, a.Routes)
		}
	}
	if !strings.Contains(stderr.String(), "lab libcalls: 1 runs of") {
		t.Errorf("stderr %q lacks the plan", stderr.String())
	}
}
