package bench

import (
	"context"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
		{"unknown mode", func(c *Config) { c.Modes = []string{"none", "turbo"} }, `Modes (-modes): unknown mode "turbo" (valid: floor, none, reserve`},
		{"floor", func(c *Config) { c.Modes = []string{"floor", "none:1"} }, ""},
		{"floor with workers", func(c *Config) { c.Modes = []string{"floor:2"} }, `Modes (-modes): "floor:2": the floor has no scheduler, so no worker count (give floor alone)`},
		{"floor twice", func(c *Config) { c.Modes = []string{"floor", "floor"} }, `mode "floor" given twice`},
		{"io zero", func(c *Config) { c.IOConcurrency = 0 }, "IOConcurrency (-io-c) must be in 1..1000 connections, got 0"},
		{"io too many", func(c *Config) { c.IOConcurrency = 1001 }, "IOConcurrency (-io-c) must be in 1..1000 connections, got 1001"},
		{"io one", func(c *Config) { c.IOConcurrency = 1 }, ""},
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
		{"unknown mode with workers", func(c *Config) { c.Modes = []string{"turbo:1"} }, `unknown mode "turbo:1"`},
		{"mode with workers twice", func(c *Config) { c.Modes = []string{"none:1", "none:1"} }, `mode "none:1" given twice`},
		{"quota smallest", func(c *Config) { c.CPUQuota = MinCPUQuota }, ""},
		{"quota all CPUs", func(c *Config) { c.CPUQuota = float64(runtime.NumCPU()) }, ""},
		{"quota too small", func(c *Config) { c.CPUQuota = 0.05 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.." + strconv.Itoa(runtime.NumCPU()) + " CPUs, got 0.05"},
		{"quota negative", func(c *Config) { c.CPUQuota = -1 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.."},
		{"quota too large", func(c *Config) { c.CPUQuota = float64(runtime.NumCPU()) + 0.5 }, "CPUQuota (-cpu-quota) must be 0 (no quota) or in 0.1.."},
		{"quota NaN", func(c *Config) { c.CPUQuota = math.NaN() }, "got NaN"},
		{"trace above", func(c *Config) { c.TraceDir, c.TraceAbove = "t", 3*time.Millisecond }, ""},
		{"trace above without trace", func(c *Config) { c.TraceAbove = 3 * time.Millisecond }, "TraceAbove (-trace-above) 3ms needs TraceDir (-trace DIR)"},
		{"trace above negative", func(c *Config) { c.TraceDir, c.TraceAbove = "t", -time.Millisecond }, "TraceAbove (-trace-above) must be 0 (the default: twice the idle p99, for io-heavy twice the floor's) or in 1µs..1m0s, got -1ms"},
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
		modes []string
		want  time.Duration
	}{
		{nil, time.Second}, // every mode
		{[]string{"none"}, 2 * time.Second},
		{[]string{"floor"}, 2 * time.Second},
		{[]string{"floor", "none"}, 1500 * time.Millisecond},
		{[]string{"none", "reserve", "ospriority"}, time.Second},
		{[]string{"floor", "none", "reserve", "ospriority", "ospriority:1"}, time.Second},
	}
	for _, tt := range tests {
		if got := QuickStep(tt.modes); got != tt.want {
			t.Errorf("QuickStep(%q): got %v, want %v", tt.modes, got, tt.want)
		}
	}
	// A quick run of every mode: its steps, warm-ups and settling fit in
	// 35 s, so that with the build and the start-ups it stays under 60 s.
	steps := 0
	for _, m := range AllModes() {
		steps += len(StepsOf(m))
	}
	if total := time.Duration(steps) * (QuickStep(nil) + QuickWarmup + DefaultSettle); total > 35*time.Second {
		t.Errorf("a quick run's %d steps take %v in all, want <= 35s", steps, total)
	}
}

func TestStepsOf(t *testing.T) {
	if got, want := StepsOf(ModeFloor), []string{StepIdle, StepHogSched, StepIOHeavy}; !slices.Equal(got, want) {
		t.Errorf("StepsOf(floor): got %v, want %v", got, want)
	}
	if got := StepsOf("ospriority:1"); !slices.Equal(got, Steps()) {
		t.Errorf("StepsOf(ospriority:1): got %v, want every step %v", got, Steps())
	}
	// Every step of the floor is its own reference; of the others, the
	// ones it has a counterpart for.
	for step, want := range map[string]string{StepIdle: StepIdle, StepHogDirect: "", StepHogSched: StepHogSched,
		StepHogNoCkpt: StepHogSched, StepHogSchedSm: "", StepIOHeavy: StepIOHeavy} {
		if got := floorStepOf(step); got != want {
			t.Errorf("floorStepOf(%s): got %q, want %q", step, got, want)
		}
		if want != "" && !slices.Contains(StepsOf(ModeFloor), want) {
			t.Errorf("floorStepOf(%s) = %s, which the floor does not measure", step, want)
		}
	}
	if AllModes()[0] != ModeFloor {
		t.Errorf("AllModes: got %v, want the floor first", AllModes())
	}
}
