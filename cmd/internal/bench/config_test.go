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

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
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
		{"steps", func(c *Config) { c.Steps = []string{StepNeighbor, StepIdle} }, ""},
		{"steps unknown", func(c *Config) { c.Steps = []string{"neighbour"} }, `Steps (-steps): unknown step "neighbour" (valid: idle, hog-direct, hog-sched, hog-nockpt, hog-sched+small, io-heavy, neighbor-alone, neighbor, neighbor-nockpt, tenants, auto)`},
		{"steps twice", func(c *Config) { c.Steps = []string{StepIdle, StepIdle} }, `Steps (-steps): step "idle" given twice`},
		{"steps of no mode", func(c *Config) { c.Modes, c.Steps = []string{"none", "reserve"}, []string{StepNeighborAlone} },
			"Steps (-steps) neighbor-alone: no mode of -modes (none,reserve) has any of them (the floor has idle, hog-sched, io-heavy, neighbor-alone, neighbor and tenants; the isolation modes idle, hog-direct, hog-sched, hog-nockpt, hog-sched+small, io-heavy, neighbor, neighbor-nockpt, tenants and auto)"},
		{"steps auto", func(c *Config) { c.Modes, c.Steps = []string{"none"}, []string{StepAuto} }, ""},
		{"steps auto of the floor alone", func(c *Config) { c.Modes, c.Steps = []string{"floor"}, []string{StepAuto} }, ""}, // its hog-sched
		{"steps the floor's alone", func(c *Config) { c.Modes, c.Steps = []string{"floor", "none"}, []string{StepNeighborAlone} }, ""},
		{"neighbor-c zero", func(c *Config) { c.NeighborConcurrency = 0 }, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 0"},
		{"neighbor-c too many", func(c *Config) { c.NeighborConcurrency = 257 }, "NeighborConcurrency (-neighbor-c) must be in 1..256 threads, got 257"},
		{"neighbor-c largest", func(c *Config) { c.NeighborConcurrency = MaxNeighborConcurrency }, ""},
		{"clean", func(c *Config) { c.Garbage = 0 }, ""},
		{"heavy garbage", func(c *Config) { c.Garbage = demo.HeavyGarbage }, ""},
		{"garbage negative", func(c *Config) { c.Garbage = -1 }, "Garbage (-clean, -gc) must be in 0..4194304 bytes (0: no garbage), got -1"},
		{"cgroups with quota", func(c *Config) { c.Cgroups, c.CPUQuota = true, 1 }, ""},
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
		modes, steps []string
		want         time.Duration
	}{
		{nil, nil, 600 * time.Millisecond}, // every mode
		{[]string{"none"}, nil, 2 * time.Second},
		{[]string{"floor"}, nil, 2 * time.Second},
		{[]string{"floor", "none"}, nil, 1250 * time.Millisecond},
		{[]string{"none", "reserve", "ospriority"}, nil, 600 * time.Millisecond},
		{[]string{"floor", "none", "reserve", "ospriority", "ospriority:1"}, nil, 600 * time.Millisecond},
		{[]string{"floor", "ospriority", "reserve"}, []string{StepNeighbor}, 2 * time.Second},
		{nil, []string{StepIdle, StepHogSched, StepNeighbor}, 1250 * time.Millisecond}, // 12 steps
		{[]string{"none"}, []string{StepNeighborAlone}, 2 * time.Second},               // none at all
	}
	for _, tt := range tests {
		if got := QuickStep(tt.modes, tt.steps); got != tt.want {
			t.Errorf("QuickStep(%q, %q): got %v, want %v", tt.modes, tt.steps, got, tt.want)
		}
	}
	// A quick run of every mode: its steps, warm-ups and settling fit in
	// 25 s, so that with the build, the start-ups and the waits for the
	// servers to go quiet it stays under 60 s.
	steps := 0
	quick := Config{Quick: true}
	for _, m := range AllModes() {
		steps += len(quick.stepsOf(m))
	}
	if total := time.Duration(steps) * (QuickStep(nil, nil) + QuickWarmup + QuickSettle); total > 25*time.Second {
		t.Errorf("a quick run's %d steps take %v in all, want <= 25s", steps, total)
	}
}

func TestStepsOf(t *testing.T) {
	if got, want := StepsOf(ModeFloor), []string{StepIdle, StepHogSched, StepIOHeavy, StepNeighborAlone, StepNeighbor}; !slices.Equal(got, want) {
		t.Errorf("StepsOf(floor): got %v, want %v", got, want)
	}
	// The default isolation mode also measures auto, last, on its own
	// server; the others by default not.
	def := cpusched.DefaultIsolation().String()
	for _, m := range []string{def, def + ":1"} {
		if got, want := StepsOf(m), append(Steps(), StepAuto); !slices.Equal(got, want) {
			t.Errorf("StepsOf(%s): got %v, want %v", m, got, want)
		}
	}
	for _, m := range demo.ModeNames() {
		if got := StepsOf(m + ":1"); m != def && (!slices.Equal(got, Steps()) || got[len(got)-1] != StepNeighbor) {
			t.Errorf("StepsOf(%s:1): got %v, want every step %v, the neighbour's last", m, got, Steps())
		}
	}
	// Every step of the floor is its own reference; of the others, the
	// ones it has a counterpart for.
	for step, want := range map[string]string{StepIdle: StepIdle, StepHogDirect: "", StepHogSched: StepHogSched,
		StepHogNoCkpt: StepHogSched, StepHogSchedSm: "", StepIOHeavy: StepIOHeavy, StepNeighbor: StepNeighbor, StepNeighborAlone: "",
		StepAuto: StepHogSched, StepNeighborNoCkpt: StepNeighbor} {
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
	for _, m := range AllModes() {
		for _, step := range StepsOf(m) {
			if !slices.Contains(StepNames(), step) {
				t.Errorf("StepsOf(%s) has %s, which StepNames lacks", m, step)
			}
		}
	}
}

// TestConfigStepsOf: -steps keeps the named steps of each mode, and in the
// floor those they compare with.
func TestConfigStepsOf(t *testing.T) {
	tests := []struct {
		steps []string
		mode  string
		want  []string
	}{
		{nil, ModeFloor, StepsOf(ModeFloor)},
		{nil, "reserve", Steps()},
		{[]string{StepNeighbor}, ModeFloor, []string{StepNeighbor}},
		{[]string{StepNeighbor}, "ospriority", []string{StepNeighbor}},
		{[]string{StepNeighbor, StepNeighborAlone}, ModeFloor, []string{StepNeighborAlone, StepNeighbor}},
		{[]string{StepNeighborAlone}, "none", nil},
		{[]string{StepHogNoCkpt}, ModeFloor, []string{StepHogSched}},
		{[]string{StepHogNoCkpt, StepIdle}, "none:1", []string{StepIdle, StepHogNoCkpt}},
		{[]string{StepHogDirect, StepHogSchedSm}, ModeFloor, nil},
		{[]string{StepIOHeavy, StepIdle}, "reserve", []string{StepIdle, StepIOHeavy}}, // the run's order
		// auto: every isolation mode has it, after tenants (its own server);
		// the floor measures its hog-sched instead.
		{[]string{StepAuto, StepTenants, StepIdle}, "none", []string{StepIdle, StepTenants, StepAuto}},
		{[]string{StepAuto}, "reserve:1", []string{StepAuto}},
		{[]string{StepAuto}, ModeFloor, []string{StepHogSched}},
		// neighbor-nockpt: every isolation mode has it, after neighbor;
		// the floor measures its neighbor instead.
		{[]string{StepNeighborNoCkpt, StepNeighbor}, "ospriority", []string{StepNeighbor, StepNeighborNoCkpt}},
		{[]string{StepNeighborNoCkpt}, "reserve:1", []string{StepNeighborNoCkpt}},
		{[]string{StepNeighborNoCkpt}, ModeFloor, []string{StepNeighbor}},
		{[]string{StepAuto, StepTenants}, ModeFloor, []string{StepHogSched, StepTenants}},
	}
	for _, tt := range tests {
		for _, quick := range []bool{false, true} {
			c := Config{Steps: tt.steps, Quick: quick}
			if got := c.stepsOf(tt.mode); !slices.Equal(got, tt.want) {
				t.Errorf("steps %q, mode %s, quick %v: got %v, want %v", tt.steps, tt.mode, quick, got, tt.want)
			}
		}
	}
	// A quick run's default steps leave auto out.
	def := cpusched.DefaultIsolation().String()
	if got := (Config{Quick: true}).stepsOf(def); !slices.Equal(got, Steps()) {
		t.Errorf("quick, mode %s: got %v, want %v, without auto", def, got, Steps())
	}
}
