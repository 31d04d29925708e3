// The floor mode: its hog process, the mode skipped where SCHED_IDLE
// cannot be set, and every row's ratios to the floor.

package bench

import (
	"context"
	"fmt"
	"strconv"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
)

// startIdleHog starts the floor's hog, `ServerCmd[0] idle-hog -c
// HogConcurrency`, paused, as l starts the servers and where it starts
// them (the run's shape: -cpuset's CPUs, -server-procs' GOMAXPROCS), in
// cgroup cg unless that is nil (under a CPU quota the hog shares the
// server's, as the other modes' CPU-heavy work does). Its error wraps
// hogproc.ErrNoSchedIdle where the hog's threads cannot be made
// SCHED_IDLE. A variable, so that a test can take that path on any
// machine.
var startIdleHog = func(ctx context.Context, cfg Config, l *launcher, cg *cpuCgroup) (*hogproc.Process, error) {
	return startHogProcess(ctx, l, []string{hogproc.Command, "-c", strconv.Itoa(cfg.HogConcurrency)}, l.place(serverRole, cg))
}

// skipError is a mode that cannot be measured on this machine, and why.
type skipError struct{ err error }

func (e *skipError) Error() string { return e.err.Error() }

func (e *skipError) Unwrap() error { return e.err }

// Skipped is a mode of the run that was not measured, and why.
type Skipped struct {
	Mode   string `json:"mode"`
	Reason string `json:"reason"`
}

// floorHogInfo checks, after the floor's steps, that every thread of its
// hog is still SCHED_IDLE, and describes the hog for the servers line.
func floorHogInfo(cfg Config, hog *hogproc.Process) (string, error) {
	n, err := hogproc.CheckThreads(hog.PID())
	if err != nil {
		return "", fmt.Errorf("the floor's hog is not all SCHED_IDLE: %w", err)
	}
	return fmt.Sprintf("; hog: %d goroutines in a separate process, its %d threads SCHED_IDLE", cfg.HogConcurrency, n), nil
}

// VsFloor is a row against the floor's row of the step it compares with
// (floorStepOf), in the same run.
type VsFloor struct {
	Step string `json:"floor_step"`
	// P99X is the probe's p99 over the floor's: 1.2 is 20% above it.
	P99X float64 `json:"p99_x"`
	// RPSPct is the probe's requests/s as a percentage of the floor's:
	// the rate an open loop kept, the throughput of io-heavy's closed loop.
	RPSPct float64 `json:"rps_pct"`
}

// fill sets every row's figures that depend on other rows: the hog's
// share of direct and of the floor's, and the ratios to the floor.
func (r *Report) fill() {
	r.fillPctOfDirect()
	r.fillVsFloor()
}

// fillVsFloor sets VsFloor on every row of the other modes whose step
// compares with a measured floor step, and the hog's PctOfFloor where the
// floor's row has a hog too.
func (r *Report) fillVsFloor() {
	for i := range r.Results {
		row := &r.Results[i]
		row.VsFloor = nil
		if row.Hog != nil {
			row.Hog.PctOfFloor = nil
		}
		fs := floorStepOf(row.Step)
		if row.Mode == ModeFloor || fs == "" || row.Probe == nil {
			continue
		}
		f := r.find(ModeFloor, fs)
		if f == nil || f.Probe == nil || !(f.Probe.P99Ms > 0) || !(f.Probe.RPS > 0) {
			continue
		}
		row.VsFloor = &VsFloor{Step: fs, P99X: row.Probe.P99Ms / f.Probe.P99Ms, RPSPct: row.Probe.RPS / f.Probe.RPS * 100}
		if row.Hog != nil && f.Hog != nil && f.Hog.PassesPerS > 0 {
			pct := row.Hog.PassesPerS / f.Hog.PassesPerS * 100
			row.Hog.PctOfFloor = &pct
		}
	}
}

// directRef returns the row the floor's hog throughput is a share of: the
// none mode's hog-direct, the direct handlers of a server like the floor's
// (GOMAXPROCS as the floor's, no spare P); without it, the first mode's
// hog-direct; nil if the run has none.
func (r *Report) directRef() *Result {
	if d := r.find(cpusched.IsolationNone.String(), StepHogDirect); d != nil && d.Hog != nil {
		return d
	}
	for i := range r.Results {
		if d := &r.Results[i]; d.Step == StepHogDirect && d.Hog != nil {
			return d
		}
	}
	return nil
}
