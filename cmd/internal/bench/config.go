// Config, what a run measures and how long, its defaults, limits and checks,
// and the steps.

package bench

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Defaults and limits of Config.
const (
	DefaultStep           = 7 * time.Second
	DefaultWarmup         = 500 * time.Millisecond
	DefaultSettle         = 200 * time.Millisecond
	DefaultProbeRate      = 200
	DefaultHogConcurrency = 10
	DefaultSmallRate      = 200
	// DefaultIOConcurrency is io-heavy's connections: on pathIO alone they
	// keep more than a CPU busy, the server and the load generator
	// together; fewer do not (docs/bench.md#the-busy-case).
	DefaultIOConcurrency = 32

	// QuickWarmup and QuickSettle are the warm-up and the settling of a
	// -quick run.
	QuickWarmup = 250 * time.Millisecond
	QuickSettle = 100 * time.Millisecond

	MinStep        = 100 * time.Millisecond
	MaxStep        = 10 * time.Minute
	MaxWarmup      = time.Minute
	MaxSettle      = 10 * time.Second
	MaxProbeRate   = 10000
	MaxSmallRate   = 10000
	MaxConcurrency = 1000
	MinTraceAbove  = time.Microsecond
	MaxTraceAbove  = time.Minute
	// MaxNeighborConcurrency bounds NeighborConcurrency: enough threads to
	// keep a large machine busy, few enough to start in a moment.
	MaxNeighborConcurrency = 256
)

// quickBudget is the time a -quick run may spend in its steps (start-up and
// settling come on top); QuickStep divides it between the steps, giving
// each no less than minQuickStep.
const (
	quickBudget  = 20 * time.Second
	minQuickStep = 600 * time.Millisecond
)

// ModeFloor is the reference mode: the demo server with no task ever
// submitted to its scheduler, beside the same CPU-heavy work run in a
// separate process whose threads are all SCHED_IDLE (package hogproc).
const ModeFloor = "floor"

// Step names, in the order Run measures them.
const (
	StepIdle       = "idle"
	StepHogDirect  = "hog-direct"
	StepHogSched   = "hog-sched"
	StepHogNoCkpt  = "hog-nockpt"
	StepHogSchedSm = "hog-sched+small"
	StepIOHeavy    = "io-heavy"
	// StepNeighborAlone (the floor only) and StepNeighbor run beside the
	// neighbour, a CPU-bound process at normal priority
	// (docs/bench.md#the-neighbour).
	StepNeighborAlone = "neighbor-alone"
	StepNeighbor      = "neighbor"
	// StepNeighborNoCkpt is neighbor with hog-nockpt's CPU-heavy load,
	// tasks that never call Checkpoint: the case the default mode cannot
	// move off a lowered thread where it cannot raise one
	// (docs/bench.md#the-neighbour). Every isolation mode has it, but Run
	// measures it only where Config.Steps names it (OptInSteps); its
	// floor is the floor's neighbor step.
	StepNeighborNoCkpt = "neighbor-nockpt"
	// StepTenants runs groups of tasks with weights beside the probe
	// (tenants.go, docs/bench.md#tenants). Every mode has it, but Run
	// measures it only where Config.Steps names it (OptInSteps).
	StepTenants = "tenants"
	// StepAuto is hog-sched's loads on a server of its own that serves
	// the whole demo through httpsched.Auto (serve -auto), with the
	// CPU-heavy load sent to the direct path, no route marked: Auto finds
	// /checksum heavy by its CPU (docs/bench.md#auto). A default step of
	// the default isolation mode (StepsOf); the other isolation modes
	// measure it where Config.Steps names it, the floor never.
	StepAuto = "auto"
)

// Steps returns the step names of an isolation mode in the order Run
// measures them.
func Steps() []string {
	return []string{StepIdle, StepHogDirect, StepHogSched, StepHogNoCkpt, StepHogSchedSm, StepIOHeavy, StepNeighbor}
}

// StepNames returns every step name of every mode, in the order Run
// measures them: the names Config.Steps takes. auto comes last, on its
// own server, after those of the mode's server.
func StepNames() []string {
	return []string{StepIdle, StepHogDirect, StepHogSched, StepHogNoCkpt, StepHogSchedSm, StepIOHeavy, StepNeighborAlone, StepNeighbor, StepNeighborNoCkpt, StepTenants, StepAuto}
}

// OptInSteps returns the steps Run measures only where Config.Steps names
// them, after the others: tenants, in every mode, whose 8 s or so in each
// would add more than 30 s to a default run (docs/bench.md#tenants);
// neighbor-nockpt, in the isolation modes, a step more in each; auto, in
// the isolation modes but the default one, which measures it by default
// (StepsOf): a server of its own and a step in each would add about as
// much.
func OptInSteps() []string { return []string{StepNeighborNoCkpt, StepTenants, StepAuto} }

// StepsOf returns the steps Run measures in mode (a Config.Modes item)
// when Config.Steps is empty: the floor has no direct or scheduled load
// of its own, and no scheduled small requests, so only the steps the
// others are compared with, and the neighbour alone, their reference;
// the default isolation mode (cpusched.DefaultIsolation) also has auto.
func StepsOf(mode string) []string {
	name, _, _ := strings.Cut(mode, ":")
	switch name {
	case ModeFloor:
		return []string{StepIdle, StepHogSched, StepIOHeavy, StepNeighborAlone, StepNeighbor}
	case cpusched.DefaultIsolation().String():
		return append(Steps(), StepAuto)
	}
	return Steps()
}

// hasStep reports whether mode has step, by default or where
// Config.Steps names it: the floor has no auto.
func hasStep(mode, step string) bool {
	if slices.Contains(StepsOf(mode), step) || step == StepTenants {
		return true
	}
	name, _, _ := strings.Cut(mode, ":")
	return (step == StepAuto || step == StepNeighborNoCkpt) && name != ModeFloor
}

// floorStepOf returns the floor's step that step is compared with, or ""
// for none: hog-nockpt's and auto's is hog-sched, the same CPU work beside
// the probe (the floor's hog never calls Checkpoint, like hog-nockpt's
// tasks), and neighbor-nockpt's neighbor, for the same reason;
// hog-direct and hog-sched+small have none, nor has neighbor-alone, which
// is the floor's alone.
func floorStepOf(step string) string {
	switch step {
	case StepIdle, StepHogSched, StepIOHeavy, StepNeighbor, StepTenants:
		return step
	case StepHogNoCkpt, StepAuto:
		return StepHogSched
	case StepNeighborNoCkpt:
		return StepNeighbor
	}
	return ""
}

// QuickStep returns the step length of a -quick run over modes (nil: every
// mode) and steps (nil: every step; see Config.Steps): 2 s, shortened (to
// no less than 600 ms) so that the steps of all modes fit in about 20 s,
// or as close as 600 ms steps come, and the whole run, with `go run`'s
// build, the servers' start-ups and each step's wait for the server to
// go quiet, in under 60 s (docs/bench.md#what-it-runs): with every mode's
// 26 steps, 36 s on the project's 2-vCPU machine.
func QuickStep(modes, steps []string) time.Duration {
	c := Config{Modes: modes, Steps: steps, Quick: true}
	n := 0
	for _, m := range c.modes() {
		n += len(c.stepsOf(m))
	}
	perStep := quickBudget/time.Duration(max(n, 1)) - QuickWarmup - QuickSettle
	step := min(2*time.Second, perStep.Truncate(250*time.Millisecond))
	return max(step, minQuickStep)
}

// Config describes one benchmark run. Start from DefaultConfig; the zero
// value is not valid (ServerCmd, Step, ProbeRate and the concurrencies are
// required).
type Config struct {
	// ServerCmd is the command that runs the demo server, e.g.
	// {"/path/to/cpusched", "serve"}. Run appends
	// "-addr 127.0.0.1:0 -isolation MODE -garbage BYTES"; the server must
	// print "listening on http://HOST:PORT" on stdout. The floor's hog
	// runs as `ServerCmd[0] idle-hog -c HogConcurrency`, the neighbour as
	// `ServerCmd[0] neighbor -c NeighborConcurrency`; unless Privileged,
	// a bench run as root starts each of them through `ServerCmd[0]
	// unprivileged --` (package unpriv).
	ServerCmd []string
	// Modes are the modes to measure, by name, in order; nil means every
	// mode of AllModes: the floor (ModeFloor), then every isolation mode of
	// cpusched.IsolationModes. "MODE:N" measures the isolation mode MODE
	// with N workers (overriding Workers for that server), so that one mode
	// can be measured beside itself with another worker count:
	// "ospriority,ospriority:1". Where SCHED_IDLE cannot be set, Run skips
	// the floor and says why in Report.Skipped.
	Modes []string
	// Steps are the steps to measure, by name (StepNames); nil means every
	// step of each mode (StepsOf), which leaves out OptInSteps. A mode
	// measures the steps it has of these, and the floor also those that
	// the others compare with (floorStepOf), so that their ratios have a
	// floor.
	Steps []string
	// Step is the measured length of each step (MinStep..MaxStep).
	Step time.Duration
	// Warmup runs each step's load unmeasured before its window (0..MaxWarmup).
	Warmup time.Duration
	// Settle is the pause after a step's load has stopped (0..MaxSettle).
	Settle time.Duration
	// ProbeRate is the probe's open-loop rate in requests/s (1..MaxProbeRate).
	ProbeRate float64
	// HogConcurrency is the CPU-heavy closed loop's concurrency, and the
	// floor's hog's goroutines (1..MaxConcurrency).
	HogConcurrency int
	// IOConcurrency is the connections of io-heavy's closed loop on pathIO
	// (1..MaxConcurrency).
	IOConcurrency int
	// SmallRate is the open-loop rate of the small requests, in requests/s
	// (1..MaxSmallRate), for each of the scheduled and the direct ones.
	SmallRate float64
	// Garbage is passed to every server as -garbage: the bytes of the
	// response buffer every fast request builds, the CRC32 work then
	// allocating a little too (demo.Config.Garbage; 0..demo.MaxGarbage).
	// DefaultConfig sets demo.DefaultGarbage; 0 is the clean room (bench
	// -clean), demo.HeavyGarbage the collector always busy (bench -gc).
	Garbage int
	// NeighborConcurrency is the neighbour's CPU-bound threads, one per
	// CPU by default (1..MaxNeighborConcurrency).
	NeighborConcurrency int
	// Cgroups runs each mode's server (with the floor's hog) and its
	// neighbour in a cgroup each, with equal weights, as two containers on
	// a node; without it the neighbour shares the server's cgroup: bench's
	// own, or the CPUQuota one. With CPUQuota too, the server's cgroup has
	// the quota and the neighbour's none. Linux only, and it needs the
	// right to make cgroups (root); Run reports ErrCgroups otherwise.
	Cgroups bool
	// Workers and Slice, when non-zero, are passed to every server as
	// -workers and -slice, overriding each mode's own choice.
	Workers int
	Slice   time.Duration
	// CPUQuota, when non-zero, runs every server in a cgroup of its own
	// limited to this many CPUs (MinCPUQuota..runtime.NumCPU(), or the
	// servers' half with CPUSet), with a 100 ms period: cpu.max on cgroup
	// v2, cpu.cfs_quota_us on v1; the floor's hog runs in its server's.
	// Linux only, and it needs the right to make cgroups (root); Run
	// reports ErrCPUQuota otherwise. The load generator stays outside.
	CPUQuota float64
	// CPUSet confines the servers and the floor's hog to the first half of
	// the CPUs this process may use, and bench itself (the load generator)
	// and the neighbour to the rest, for the whole run (CPUSetHalves;
	// shape.go says how). Linux only, with at least 2 CPUs.
	CPUSet bool
	// ServerProcs, when non-zero, is given to every server and the
	// floor's hog as GOMAXPROCS (1..the servers' CPUs: every CPU, or
	// their half with CPUSet), a node's service with CPUs left idle.
	ServerProcs int
	// Quick is recorded in the report's config, and leaves auto out of
	// the default steps (nil Steps), whose one more server and step would
	// take a quick run of every mode past its budget (QuickStep); the
	// caller sets Step, Warmup and Settle for a quick run (QuickStep,
	// QuickWarmup, QuickSettle).
	Quick bool
	// TraceDir, when set, records a runtime/trace of each server over the
	// measured windows of the steps tracedStep names (all but idle and
	// hog-direct; through its /debug/pprof/trace) and attributes every
	// probe request slower than twice the idle step's p99, and every
	// io-heavy request slower than twice the floor's io-heavy p99
	// (meter.threshold), to its causes (package tailtrace):
	// DIR/MODE-STEP.trace and DIR/MODE-STEP.txt. The tracing itself costs
	// the server some CPU and latency.
	TraceDir string
	// TraceAbove, when non-zero, is the client latency above which a traced
	// request is attributed, in every traced step, instead of the defaults
	// of TraceDir (MinTraceAbove..MaxTraceAbove): to look at the band just
	// above a target, say 1.5x idle. It needs TraceDir.
	TraceAbove time.Duration
	// Privileged keeps the servers, the floor's hog and the neighbour
	// running as root when the bench runs as root. Without it, there (on
	// Linux) they run as a container runs a service: uid and gid 65534, no
	// supplementary groups, no capabilities, RLIMIT_NICE 0 (launch.go). A
	// bench that is not root runs them as itself, and Privileged makes Run
	// fail with ErrPrivileged.
	Privileged bool
	// Tenants are the groups of the tenants step, in order (2..MaxTenants;
	// DefaultTenants): checked only where the step is measured.
	Tenants []Tenant
	// Progress shows what runs now; nil shows nothing.
	Progress *report.Progress
}

// DefaultConfig returns the default configuration for serverCmd.
func DefaultConfig(serverCmd ...string) Config {
	return Config{
		ServerCmd:      serverCmd,
		Step:           DefaultStep,
		Warmup:         DefaultWarmup,
		Settle:         DefaultSettle,
		ProbeRate:      DefaultProbeRate,
		HogConcurrency: DefaultHogConcurrency,
		SmallRate:      DefaultSmallRate,
		IOConcurrency:  DefaultIOConcurrency,
		Garbage:        demo.DefaultGarbage,

		NeighborConcurrency: runtime.NumCPU(),
		Tenants:             DefaultTenants(),
	}
}

// Validate reports the first problem with c as an error naming the field,
// its CLI flag and the valid range.
func (c Config) Validate() error {
	if len(c.ServerCmd) == 0 || c.ServerCmd[0] == "" {
		return errors.New("bench: ServerCmd is required (the command that runs `cpusched serve`)")
	}
	seen := map[string]bool{}
	for _, m := range c.Modes {
		if _, _, err := parseModeSpec(m); err != nil {
			return fmt.Errorf("bench: Modes (-modes): %w", err)
		}
		if seen[m] {
			return fmt.Errorf("bench: Modes (-modes): mode %q given twice", m)
		}
		seen[m] = true
	}
	if err := c.validateSteps(); err != nil {
		return err
	}
	if err := c.validateShape(); err != nil {
		return err
	}
	if err := c.validateTenants(); err != nil {
		return err
	}
	switch {
	case c.Step < MinStep || c.Step > MaxStep:
		return fmt.Errorf("bench: Step (-step) must be in %v..%v, got %v", MinStep, MaxStep, c.Step)
	case c.Warmup < 0 || c.Warmup > MaxWarmup:
		return fmt.Errorf("bench: Warmup must be in 0..%v, got %v", MaxWarmup, c.Warmup)
	case c.Settle < 0 || c.Settle > MaxSettle:
		return fmt.Errorf("bench: Settle must be in 0..%v, got %v", MaxSettle, c.Settle)
	case math.IsNaN(c.ProbeRate) || c.ProbeRate < 1 || c.ProbeRate > MaxProbeRate:
		return fmt.Errorf("bench: ProbeRate (-probe-rate) must be in 1..%d requests/s, got %v", MaxProbeRate, c.ProbeRate)
	case c.HogConcurrency < 1 || c.HogConcurrency > MaxConcurrency:
		return fmt.Errorf("bench: HogConcurrency (-hog-c) must be in 1..%d, got %d", MaxConcurrency, c.HogConcurrency)
	case c.IOConcurrency < 1 || c.IOConcurrency > MaxConcurrency:
		return fmt.Errorf("bench: IOConcurrency (-io-c) must be in 1..%d connections, got %d", MaxConcurrency, c.IOConcurrency)
	case math.IsNaN(c.SmallRate) || c.SmallRate < 1 || c.SmallRate > MaxSmallRate:
		return fmt.Errorf("bench: SmallRate (-small-rate) must be in 1..%d requests/s, got %v", MaxSmallRate, c.SmallRate)
	case c.CPUQuota != 0 && !(c.CPUQuota >= MinCPUQuota && c.CPUQuota <= float64(c.serverCPUCount())):
		return fmt.Errorf("bench: CPUQuota (-cpu-quota) must be 0 (no quota) or in %g..%d CPUs%s, got %g", MinCPUQuota, c.serverCPUCount(), underCPUSet(c), c.CPUQuota)
	case c.TraceAbove != 0 && (c.TraceAbove < MinTraceAbove || c.TraceAbove > MaxTraceAbove):
		return fmt.Errorf("bench: TraceAbove (-trace-above) must be 0 (the default: twice the idle p99, for io-heavy twice the floor's) or in %v..%v, got %v", MinTraceAbove, MaxTraceAbove, c.TraceAbove)
	case c.TraceAbove != 0 && c.TraceDir == "":
		return fmt.Errorf("bench: TraceAbove (-trace-above) %v needs TraceDir (-trace DIR): only traced requests are attributed", c.TraceAbove)
	case c.NeighborConcurrency < 1 || c.NeighborConcurrency > MaxNeighborConcurrency:
		return fmt.Errorf("bench: NeighborConcurrency (-neighbor-c) must be in 1..%d threads, got %d", MaxNeighborConcurrency, c.NeighborConcurrency)
	}
	if err := demo.CheckGarbage(c.Garbage); err != nil {
		return fmt.Errorf("bench: Garbage (-clean, -gc) %v", err)
	}
	var oe *demo.OverrideError
	if err := demo.CheckOverrides(c.Workers, c.Slice); errors.As(err, &oe) {
		return fmt.Errorf("bench: %s (%s) %v: %v (or 0 for each mode's default)", oe.Field, oe.Flag, oe.Value, oe.Err)
	}
	return nil
}

// parseModeSpec parses an item of Config.Modes, "MODE" or "MODE:N", into
// the mode's name and its worker count (0 for "MODE").
func parseModeSpec(spec string) (mode string, workers int, err error) {
	mode, n, hasWorkers := strings.Cut(spec, ":")
	if mode == ModeFloor {
		if hasWorkers {
			return "", 0, fmt.Errorf("%q: the floor has no scheduler, so no worker count (give %s alone)", spec, ModeFloor)
		}
		return mode, 0, nil
	}
	if _, err := cpusched.ParseIsolation(mode); err != nil {
		return "", 0, fmt.Errorf("unknown mode %q (valid: %s; MODE:N for an isolation mode with N workers)", spec, strings.Join(AllModes(), ", "))
	}
	if !hasWorkers {
		return mode, 0, nil
	}
	workers, err = strconv.Atoi(n)
	if err != nil {
		return "", 0, fmt.Errorf("%q: the worker count after the colon must be an integer", spec)
	}
	if err := cpusched.CheckOptions(cpusched.WithWorkers(workers)); err != nil {
		return "", 0, fmt.Errorf("%q: the worker count after the colon: %v", spec, err)
	}
	return mode, workers, nil
}

// AllModes returns the names of every mode Run can measure, in the order
// it measures them by default: the floor, then every isolation mode this
// build supports.
func AllModes() []string { return append([]string{ModeFloor}, demo.ModeNames()...) }

// validateSteps checks Config.Steps: known names, each once, and at least
// one step that a mode of the run measures.
func (c Config) validateSteps() error {
	seen := map[string]bool{}
	for _, s := range c.Steps {
		if !slices.Contains(StepNames(), s) {
			return fmt.Errorf("bench: Steps (-steps): unknown step %q (valid: %s)", s, strings.Join(StepNames(), ", "))
		}
		if seen[s] {
			return fmt.Errorf("bench: Steps (-steps): step %q given twice", s)
		}
		seen[s] = true
	}
	if len(c.Steps) == 0 {
		return nil
	}
	for _, m := range c.modes() {
		if len(c.stepsOf(m)) > 0 {
			return nil
		}
	}
	return fmt.Errorf("bench: Steps (-steps) %s: no mode of -modes (%s) has any of them (the floor has %s and %s; the isolation modes %s, %s, %s and %s)",
		strings.Join(c.Steps, ","), strings.Join(c.modes(), ","), strings.Join(StepsOf(ModeFloor), ", "), StepTenants, strings.Join(Steps(), ", "), StepNeighborNoCkpt, StepTenants, StepAuto)
}

// stepsOf returns the steps Run measures in mode, in StepNames' order:
// StepsOf(mode), keeping only those Config.Steps names, in the floor also
// those the named steps compare with; and the OptInSteps it names that
// mode has. A Quick run's default steps leave auto out.
func (c Config) stepsOf(mode string) []string {
	if len(c.Steps) == 0 && c.Quick {
		return slices.DeleteFunc(StepsOf(mode), func(s string) bool { return s == StepAuto })
	}
	if len(c.Steps) == 0 {
		return StepsOf(mode)
	}
	var out []string
	for _, s := range StepNames() {
		if !hasStep(mode, s) {
			continue
		}
		wanted := slices.Contains(c.Steps, s)
		if mode == ModeFloor {
			for _, named := range c.Steps {
				wanted = wanted || floorStepOf(named) == s
			}
		}
		if wanted {
			out = append(out, s)
		}
	}
	return out
}

// modes returns the Config.Modes items to measure: every mode when none
// is given.
func (c Config) modes() []string {
	if len(c.Modes) == 0 {
		return AllModes()
	}
	return c.Modes
}
