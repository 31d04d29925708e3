// Package libcalls measures CPU-heavy library calls, which cannot call
// Checkpoint, run through httpsched in the Scheduler's default mode against
// the same calls run directly on the handler's goroutine: what they cost
// the calls' throughput and what they spare a light route's latency.
//
// Most CPU-heavy work in a Go service is a call into a library (a gzip of
// a response, a bcrypt hash), which runs to its end without a Checkpoint.
// The server, `cpusched lab-child libcalls serve`, has a 1 ms light route
// (the probe's) and, for each kind of call (Kinds), the same handler
// twice: run directly, and through httpsched.Handler over a cpusched.New
// Scheduler. Each run starts a fresh server and measures, with the probe
// open-loop all along:
//
//	idle    the probe alone
//	direct  closed-loop clients on the direct routes of every kind at once
//	sched   the same clients on the scheduled routes
//	auto    the probe and the same clients on the direct routes of a
//	        second server, the auto server, whose whole ServeMux is
//	        wrapped in httpsched.Auto and no route marked by hand; optional
//	floor   the same clients on a second server whose threads are all
//	        SCHED_IDLE (the most any scheduler inside the first could
//	        give the probe), as the bench's floor; optional
//
// A step with heavy clients runs them for a warm-up, then the probe's
// window, then stops them and waits until no heavy request is left in the
// server; then it asks the server for the calls that ran in the window,
// each counted for the share of its run inside it (Calls says why). As `cpusched bench` does,
// the servers run as a container's service (package unpriv) when the lab
// runs as root.
package libcalls

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// The steps of a run, in order.
const (
	StepIdle   = "idle"
	StepDirect = "direct"
	StepSched  = "sched"
	StepAuto   = "auto"
	StepFloor  = "floor"
)

// Defaults of Config and of the flags, and their limits.
const (
	DefaultRuns = 3
	MaxRuns     = 20
	// DefaultClients is the closed-loop clients per kind: with both kinds,
	// 16 heavy requests in flight, enough to keep every CPU of a small
	// machine busy through the scheduler's queue.
	DefaultClients = 8
	MaxClients     = 256
	// DefaultRate is the probe's rate, requests/s, as the bench's.
	DefaultRate = 200
	MaxRate     = 10000
	// DefaultWindow is each step's measured window; DefaultWarmup the
	// heavy load's (and the probe's) run before it.
	DefaultWindow = 10 * time.Second
	MinWindow     = 200 * time.Millisecond
	MaxWindow     = 10 * time.Minute
	DefaultWarmup = 3 * time.Second
	MaxWarmup     = time.Minute
	// DefaultCost is the bcrypt cost whose hash takes 50-100 ms on the
	// project's machine, a login's (docs/lab/libcalls.md has the timings).
	DefaultCost = 10
)

// The -quick run: one run of short windows.
const (
	QuickRuns   = 1
	QuickWindow = 1500 * time.Millisecond
	QuickWarmup = time.Second
)

// Timeouts: a server's first line, a heavy request (queued behind 15
// others on a busy machine), a /stats answer (the floor's server is
// SCHED_IDLE), and the wait for a server to go quiet.
const (
	helloTimeout = 30 * time.Second
	heavyTimeout = 2 * time.Minute
	statsTimeout = 30 * time.Second
	settleLimit  = 2 * time.Minute
)

// Config is one run of the experiment.
type Config struct {
	Runs    int           // 1..MaxRuns
	Kinds   []string      // each one of Kinds, once; not empty
	Clients int           // closed-loop clients per kind, 1..MaxClients
	Rate    float64       // the probe's requests/s, (0, MaxRate]
	Window  time.Duration // each step's measured window, MinWindow..MaxWindow
	Warmup  time.Duration // before each window, 0..MaxWarmup
	Cost    int           // bcrypt cost, MinCost..MaxCost
	// Auto adds the auto step; Floor the floor step.
	Auto, Floor bool
	// Privileged runs the servers as root where the lab runs as root;
	// without it they run as a container's service.
	Privileged bool
	// Command builds `cpusched lab-child libcalls ARGS`.
	Command childproc.Command
	// Progress, if set, is called with a status line as the run goes.
	Progress func(status string)
}

// Validate reports the first problem with c as an error naming the flag
// and its valid values.
func (c Config) Validate() error {
	if err := cli.CheckChoices("kinds", "kind", c.Kinds, Kinds); err != nil {
		return err
	}
	switch {
	case c.Runs < 1 || c.Runs > MaxRuns:
		return fmt.Errorf("-runs must be in 1..%d, got %d", MaxRuns, c.Runs)
	case c.Clients < 1 || c.Clients > MaxClients:
		return fmt.Errorf("-clients must be in 1..%d, got %d", MaxClients, c.Clients)
	case math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > MaxRate:
		return fmt.Errorf("-rate must be in (0, %d] requests/s, got %v", MaxRate, c.Rate)
	case c.Window < MinWindow || c.Window > MaxWindow:
		return fmt.Errorf("-window must be in %v..%v, got %v", MinWindow, MaxWindow, c.Window)
	case c.Warmup < 0 || c.Warmup > MaxWarmup:
		return fmt.Errorf("-warmup must be in 0s..%v, got %v", MaxWarmup, c.Warmup)
	case c.Cost < MinCost || c.Cost > MaxCost:
		return fmt.Errorf("-cost must be in %d..%d, got %d", MinCost, MaxCost, c.Cost)
	}
	return nil
}

// Results is what Run measured.
type Results struct {
	// Server says how the servers ran: unprivileged as a service, or as
	// the lab runs.
	Server string      `json:"server"`
	Runs   []RunResult `json:"runs"`
}

// RunResult is one run: its servers and its steps.
type RunResult struct {
	Run     int       `json:"run"` // from 1
	Started time.Time `json:"started"`
	Server  Hello     `json:"server_hello"`
	// Auto is the auto server's Hello, where the auto step ran.
	Auto *Hello `json:"auto_hello,omitempty"`
	// Floor is the floor's server's Hello; FloorSkipped why the floor step
	// was not measured when Config.Floor asked for it.
	Floor        *Hello       `json:"floor_hello,omitempty"`
	FloorSkipped string       `json:"floor_skipped,omitempty"`
	Steps        []StepResult `json:"steps"`
}

// StepResult is one step of a run.
type StepResult struct {
	Step  string       `json:"step"`
	Probe load.Summary `json:"probe"`
	// P99XIdle is the probe's p99 over the idle step's in the same run.
	P99XIdle float64      `json:"p99_x_idle"`
	Heavy    []KindResult `json:"heavy,omitempty"`
	// ContendedS is how long, in the window, the Scheduler ran its tasks
	// at normal priority because other processes kept the CPUs busy
	// (Stats.ContendedTime); sched and auto steps only.
	ContendedS float64 `json:"contended_s,omitempty"`
	// Auto step only: the probe's p99 over the sched step's and over the
	// floor step's in the same run (0 without that step), and what
	// httpsched.Auto made of the routes, read once the step settled.
	P99XSched float64     `json:"p99_x_sched,omitempty"`
	P99XFloor float64     `json:"p99_x_floor,omitempty"`
	Routes    []AutoRoute `json:"routes,omitempty"`
}

// KindResult is one kind's heavy calls in a step.
type KindResult struct {
	Kind string `json:"kind"`
	// Calls is the calls that ran in the window, each counted for the
	// share of its run inside it (the server's Calls); Completed the
	// calls that ended in it.
	Calls     float64 `json:"calls"`
	Completed int64   `json:"completed"`
	OpsPerS   float64 `json:"ops_per_s"` // Calls over the window, by the server's clock
	// PctOfDirect is OpsPerS as a percentage of the direct step's, in the
	// same run; nil in the direct step.
	PctOfDirect *float64 `json:"pct_of_direct,omitempty"`
	// Failed counts the heavy requests of the step that failed or were
	// answered outside 2xx (those abandoned when the step ended are not).
	Failed int64 `json:"failed"`
}

// Kind returns the step's result of kind, nil if it has none.
func (s *StepResult) Kind(kind string) *KindResult {
	for i := range s.Heavy {
		if s.Heavy[i].Kind == kind {
			return &s.Heavy[i]
		}
	}
	return nil
}

// Step returns the run's step named step, nil if it has none.
func (r *RunResult) Step(step string) *StepResult {
	for i := range r.Steps {
		if r.Steps[i].Step == step {
			return &r.Steps[i]
		}
	}
	return nil
}

// Run measures cfg.Runs runs, each with a fresh server (and floor's
// server). A server that fails to start or dies, or a load that cannot
// run, stops it with an error; the runs measured before are returned with
// it. Cancelling ctx stops the servers and returns ctx.Err(). Run starts
// nothing if -privileged asks for what this process cannot give.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Command == nil {
		return nil, errors.New("libcalls.Run: Config.Command is nil")
	}
	l, err := newLauncher(cfg.Privileged)
	if err != nil {
		return nil, err
	}
	defer l.close()
	res := &Results{Server: l.server}
	for i := range cfg.Runs {
		r, err := runOnce(ctx, cfg, l, i+1)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return res, fmt.Errorf("run %d: %w", i+1, err)
		}
		res.Runs = append(res.Runs, r)
	}
	return res, nil
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		c.Progress(fmt.Sprintf(format, args...))
	}
}

// runOnce is one run: its server, then its steps.
func runOnce(ctx context.Context, cfg Config, l *launcher, n int) (RunResult, error) {
	res := RunResult{Run: n, Started: time.Now().UTC()}
	cfg.progress("run %d of %d: starting the server", n, cfg.Runs)
	srv, err := startServer(ctx, cfg, l, plainServer)
	if err != nil {
		return res, fmt.Errorf("the server: %w", err)
	}
	defer srv.stop()
	res.Server = srv.hello
	m := newMeter(cfg, srv)
	defer m.close()
	phase := func(step, what string) { cfg.progress("run %d of %d: %s: %s", n, cfg.Runs, step, what) }

	phase("warm-up", "one call of each route")
	if err := m.warm(ctx, 1, pathDirect, pathSched); err != nil {
		return res, err
	}
	for _, step := range []string{StepIdle, StepDirect, StepSched} {
		s, err := m.step(ctx, step, srv, pathFor(step), func(what string) { phase(step, what) })
		if err != nil {
			return res, fmt.Errorf("step %s: %w", step, srv.annotate(err))
		}
		res.Steps = append(res.Steps, s)
	}
	if cfg.Auto {
		s, hello, err := autoStep(ctx, cfg, l, func(what string) { phase(StepAuto, what) })
		if err != nil {
			return res, err
		}
		res.Auto = &hello
		res.Steps = append(res.Steps, s)
	}
	if cfg.Floor {
		phase(StepFloor, "starting the floor's server")
		floor, err := startServer(ctx, cfg, l, floorServer)
		switch {
		case errors.Is(err, hogproc.ErrNoSchedIdle):
			res.FloorSkipped = err.Error()
		case err != nil:
			return res, fmt.Errorf("the floor's server: %w", err)
		default:
			defer floor.stop()
			res.Floor = &floor.hello
			s, err := m.step(ctx, StepFloor, floor, pathDirect, func(what string) { phase(StepFloor, what) })
			if err == nil {
				// Every thread, those the runtime started during the step
				// too, must still be SCHED_IDLE for the floor to be one.
				_, err = hogproc.CheckThreads(floor.cmd.Process.Pid)
			}
			if err != nil {
				return res, fmt.Errorf("step %s: %w", StepFloor, floor.annotate(srv.annotate(err)))
			}
			res.Steps = append(res.Steps, s)
		}
	}
	res.fill()
	select {
	case <-srv.exited:
		return res, fmt.Errorf("the server died during the run: %s", srv.exitError())
	default:
	}
	return res, nil
}

// autoStep measures the auto step on its own server, started for it and
// stopped before it returns: two calls of each heavy route (Auto
// measures both, and the second decides), then the step with the probe
// on the auto server too, since its light route is behind Auto as well.
func autoStep(ctx context.Context, cfg Config, l *launcher, phase func(string)) (StepResult, Hello, error) {
	phase("starting the auto server")
	srv, err := startServer(ctx, cfg, l, autoServer)
	if err != nil {
		return StepResult{}, Hello{}, fmt.Errorf("the auto server: %w", err)
	}
	defer srv.stop()
	m := newMeter(cfg, srv)
	defer m.close()
	phase("two calls of each heavy route")
	if err := m.warm(ctx, 2, pathDirect); err != nil {
		return StepResult{}, srv.hello, fmt.Errorf("step %s: %w", StepAuto, srv.annotate(err))
	}
	s, err := m.step(ctx, StepAuto, srv, pathDirect, phase)
	if err != nil {
		return s, srv.hello, fmt.Errorf("step %s: %w", StepAuto, srv.annotate(err))
	}
	return s, srv.hello, nil
}

// pathFor returns the heavy routes' prefix of step, "" for none.
func pathFor(step string) string {
	switch step {
	case StepDirect, StepAuto:
		return pathDirect
	case StepSched:
		return pathSched
	}
	return ""
}

// fill sets the ratios of each step to the idle and direct steps, and
// of the auto step to the sched and floor steps.
func (r *RunResult) fill() {
	idle, direct := r.Step(StepIdle), r.Step(StepDirect)
	sched, floor := r.Step(StepSched), r.Step(StepFloor)
	for i := range r.Steps {
		s := &r.Steps[i]
		if idle != nil && idle.Probe.P99Ms > 0 {
			s.P99XIdle = s.Probe.P99Ms / idle.Probe.P99Ms
		}
		if s.Step == StepAuto && sched != nil && sched.Probe.P99Ms > 0 {
			s.P99XSched = s.Probe.P99Ms / sched.Probe.P99Ms
		}
		if s.Step == StepAuto && floor != nil && floor.Probe.P99Ms > 0 {
			s.P99XFloor = s.Probe.P99Ms / floor.Probe.P99Ms
		}
		if direct == nil || s.Step == StepDirect {
			continue
		}
		for j := range s.Heavy {
			k := &s.Heavy[j]
			if d := direct.Kind(k.Kind); d != nil && d.OpsPerS > 0 {
				pct := k.OpsPerS / d.OpsPerS * 100
				k.PctOfDirect = &pct
			}
		}
	}
}
