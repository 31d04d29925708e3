// Package bench runs the mixed-workload benchmark behind `cpusched bench`:
// the demo server's 1 ms endpoint measured under CPU load, isolation mode
// beside isolation mode.
//
// For each mode, Run starts the demo server as a child process (so that the
// load generator does not share the server's Go runtime), waits until it
// answers, and runs seven steps of equal length (Config.Steps may name
// fewer), each after a short unmeasured warm-up, then in the default
// isolation mode an eighth on a server of its own:
//
//	idle             the probe alone: open loop at ProbeRate on /delay1ms
//	hog-direct       + closed loop of HogConcurrency on /checksum?sched=0
//	hog-sched        the same CPU load through cpusched (/checksum?sched=1)
//	hog-nockpt       the same through cpusched without a Checkpoint
//	                 (/checksum?sched=1&checkpoint=0)
//	hog-sched+small  hog-sched's, plus open loop at SmallRate on
//	                 /checksumSmallTaskWithCpuWorker?sched=1 (10
//	                 passes), and the same small requests at the same
//	                 rate with sched=0
//	io-heavy         hog-sched's CPU load, and instead of the probe a
//	                 closed loop of IOConcurrency on /delay?d=500us
//	neighbor         hog-sched+small's loads beside the neighbour: a child
//	                 process at normal priority with NeighborConcurrency
//	                 CPU-bound goroutines (package hogproc), started once
//	                 per mode, paused, and run only over this step
//	auto             hog-sched's loads, the CPU-heavy one on
//	                 /checksum?sched=0, on a server of its own that
//	                 serves the whole demo through httpsched.Auto
//	                 (serve -auto; auto.go): in the default isolation mode,
//	                 and in the others where Config.Steps names it
//
// The floor mode (ModeFloor) is the reference the others are compared with:
// its server gets no task, and the same CPU-heavy work runs in a separate
// process whose threads are all SCHED_IDLE (package hogproc), in its
// idle, hog-sched, io-heavy and neighbor steps (StepsOf; its neighbor has
// the direct small requests only), and its neighbor-alone step is the
// probe beside the neighbour alone. Report.fill sets each row's ratios to
// the floor's step it compares with (floorStepOf).
//
// The server makes garbage (Config.Garbage), and each row has the GC
// pauses of its own window: the difference of the runtime's cumulative
// pause histograms, whose buckets the demo's /stats carries (gcwindow.go).
//
// The probe's and the small requests' latencies count from each request's
// due time (see package load); io-heavy's, a closed loop, from each
// request's send. The small requests run directly (sched=0) are their
// reference: what this machine gives a small request under this load
// without cpusched. The scheduled ones also report their task's Task.Waited
// (the demo's Cpusched-Waited-Ns header): the queueing delay the scheduler
// itself added.
// CPU-heavy throughput is the server's own count of CRC32 passes (the
// floor's hog's, in the floor mode) over the measured window, so requests
// still in flight at the window's end count for the work they did. Between steps the previous step's load is cancelled and
// Run waits until the server has stopped working on it.
//
// With CPUQuota set, each server runs in a cgroup of its own with that CPU
// bandwidth limit (see cgroup.go), and each row records the cgroup's
// throttling over the measured window. With Cgroups set, the server and
// the neighbour each run in a cgroup of its own (neighbor.go). With CPUSet
// or ServerProcs set, the servers and the floor's hog run on part of the
// machine: half the CPUs, the load generator and the neighbour on the
// other half, or fewer Ps than CPUs (shape.go).
package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Run validates cfg and measures every mode in turn, each on a fresh server
// process. It returns the report of the rows measured so far together with
// the first error: a server that fails to start, a failed /stats read, or
// ctx.Err() when ctx is cancelled (Ctrl-C). An invalid cfg returns
// (nil, error) and starts nothing. On every return the processes it
// started (servers, the floor's hog, the neighbours) have exited (SIGTERM
// or a closed stdin, then SIGKILL after a grace period), and the cgroups
// it made are removed, and so is the copy of the server's binary it made
// for uid 65534 (launch.go), and with CPUSet this process's threads,
// moved to the load generator's CPUs for the run, are back on the CPUs
// they had. With CPUQuota or Cgroups set, Run first checks that cgroups
// can be made and entered; if they cannot, it returns (nil, an error
// wrapping ErrCPUQuota or ErrCgroups) and starts nothing.
// With Privileged set in a bench that is not root, it returns (nil, an
// error wrapping ErrPrivileged) and starts nothing.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	l, err := newLauncher(cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer func() {
		if rmErr := l.close(); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("bench: %w", rmErr))
		}
	}()
	rep = &Report{Machine: machineInfo(), Config: reportConfig(cfg)}
	rep.Config.Server, rep.Config.Privileged, rep.Config.ServerNote = l.server, l.privileged, l.note
	rep.Config.Shape = l.shape.report(cfg)
	var cgroups *cgroupFS
	switch {
	case cfg.CPUQuota > 0: // a check for -cgroups too
		cgroups, err = openCPUQuota(cfg.CPUQuota)
	case cfg.Cgroups:
		if cgroups, err = openCgroups(0, "-cgroups"); err != nil {
			err = fmt.Errorf("%w: %v", ErrCgroups, err)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if cgroups != nil {
		rep.Config.Cgroup = cgroups.String()
	}
	var tenants *tenantPlan
	if cfg.measuresTenants() {
		tenants = newTenantPlan(cfg, cgroups)
		rep.Config.Tenants = tenants.report()
	}
	if cfg.TraceDir != "" {
		if err := os.MkdirAll(cfg.TraceDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: TraceDir (-trace): %w", err)
		}
	}
	if others := l.shape.otherCPUs; others != nil {
		// bench is the load generator: on the CPUs the servers never run
		// on, for the run (shape.go).
		restore, err := pinProcess(others)
		if err != nil {
			return nil, fmt.Errorf("bench: CPUSet (-cpuset): %w", err)
		}
		defer func() {
			if rerr := restore(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("bench: %w", rerr))
			}
		}()
	}
	modes := cfg.modes()
	total := 0
	for _, mode := range modes {
		total += len(cfg.stepsOf(mode))
	}
	prog := newTracker(cfg, total)
	defer cfg.Progress.Done()
	floorIOP99 := 0.0 // io-heavy's attribution threshold, once the floor has run
	for mi, mode := range modes {
		if err := ctx.Err(); err != nil {
			// Cancelled before this mode: start no server for it.
			rep.fill()
			return rep, err
		}
		steps := cfg.stepsOf(mode)
		if len(steps) == 0 {
			continue // -steps names none of its steps
		}
		prog.set("%s (mode %d/%d): starting the server", mode, mi+1, len(modes))
		rows, srvInfo, err := runMode(ctx, cfg, l, cgroups, tenants, mode, floorIOP99, func(step string, si int, phase string) {
			prog.set("%s (mode %d/%d) %s (step %d/%d): %s", mode, mi+1, len(modes), step, si+1, len(steps), phase)
		}, prog.stepDone)
		var skip *skipError
		if errors.As(err, &skip) {
			rep.Skipped = append(rep.Skipped, Skipped{Mode: mode, Reason: skip.Error()})
			for range steps {
				prog.stepDone()
			}
			continue
		}
		rep.Results = append(rep.Results, rows...)
		if mode == ModeFloor {
			floorIOP99 = ioHeavyP99(rows)
		}
		if srvInfo != "" {
			rep.Servers = append(rep.Servers, srvInfo)
		}
		if err != nil {
			rep.fill()
			return rep, err
		}
	}
	rep.fill()
	return rep, nil
}

// tracker writes the progress line with the elapsed time and an estimate of
// the whole run's length.
type tracker struct {
	p        *report.Progress
	start    time.Time
	perStep  time.Duration
	total    int
	mu       sync.Mutex
	done     int
	lastText string
}

// newTracker returns the tracker of a run of steps steps, each estimated
// at its warm-up, window and settling.
func newTracker(cfg Config, steps int) *tracker {
	return &tracker{p: cfg.Progress, start: time.Now(), perStep: cfg.Warmup + cfg.Step + cfg.Settle, total: steps}
}

// set shows what runs now, with the time so far and the estimate of the
// time left.
func (t *tracker) set(format string, args ...any) {
	if t.p == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastText = fmt.Sprintf(format, args...)
	left := time.Duration(t.total-t.done) * t.perStep
	t.p.Set("bench: %s  [%.0fs elapsed, ~%.0fs left]", t.lastText, time.Since(t.start).Seconds(), left.Seconds())
}

// stepDone counts a step as done, for the estimate.
func (t *tracker) stepDone() {
	t.mu.Lock()
	t.done++
	t.mu.Unlock()
}

// ioHeavyP99 returns the io-heavy row's p99 (ms) among rows, or 0.
func ioHeavyP99(rows []Result) float64 {
	for _, r := range rows {
		if r.Step == StepIOHeavy && r.Probe != nil {
			return r.Probe.P99Ms
		}
	}
	return 0
}

// runMode measures every step of one mode (a Config.Modes item) on a fresh
// server started by l, in cgroups of cgroups unless that is nil (see
// modeCgroups), its tenants step (if any) as tenants plans it;
// floorIOP99 is the floor's io-heavy p99 measured before it, or 0. It
// returns the rows measured, the server's description ("mode: ...") and
// the first error; a *skipError if the mode cannot be measured here. The
// processes it started have exited, and the cgroups it made are removed,
// whatever it returns.
func runMode(ctx context.Context, cfg Config, l *launcher, cgroups *cgroupFS, tenants *tenantPlan, spec string, floorIOP99 float64, phase func(step string, i int, what string), stepDone func()) (rows []Result, info string, err error) {
	mode, workers, _ := parseModeSpec(spec) // Validate has checked it
	steps := cfg.stepsOf(mode)
	// The deferred calls run in reverse: the processes are stopped and
	// reaped before their cgroups are removed.
	cgs, err := newModeCgroups(cfg, cgroups)
	defer func() {
		if rmErr := cgs.remove(); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("bench: mode %s: %w", spec, rmErr))
		}
	}()
	if err != nil {
		return nil, "", fmt.Errorf("bench: mode %s: %w", spec, err)
	}
	var hog *hogproc.Process
	if mode == ModeFloor {
		if hog, err = startIdleHog(ctx, cfg, l, cgs.server); err != nil {
			if errors.Is(err, hogproc.ErrNoSchedIdle) {
				return nil, "", &skipError{err}
			}
			return nil, "", fmt.Errorf("bench: mode %s: %w", spec, err)
		}
		defer hog.Stop()
	}
	var neighbor *hogproc.Process
	if slices.ContainsFunc(steps, withNeighbor) {
		if neighbor, err = startNeighbor(ctx, cfg, l, cgs.neighbor); err != nil {
			return nil, "", fmt.Errorf("bench: mode %s: the neighbour: %w", spec, err)
		}
		defer neighbor.Stop()
	}
	place := l.place(serverRole, cgs.server)
	var quota *cpuCgroup // the cgroup whose throttling the rows record
	if cfg.CPUQuota > 0 {
		quota = cgs.server
	}
	ms := modeServer{cfg: cfg, l: l, place: place, quota: quota, spec: spec, phase: phase, stepDone: stepDone}
	onMode, onAuto := splitAutoSteps(steps)
	var idleP99 float64 // the mode's server's, for the auto server's attribution threshold
	if len(onMode) > 0 {
		var banner string
		rows, banner, idleP99, err = ms.measure(ctx, serverArgs(cfg, mode, workers), onMode, 0, func(m *meter) {
			m.floorHog, m.neighbor, m.floorIOP99 = hog, neighbor, floorIOP99
			if slices.Contains(onMode, StepTenants) {
				m.withTenants(tenants, l)
			}
		})
		info = spec + ": " + banner
		if err != nil {
			return rows, info, err
		}
	}
	if len(onAuto) > 0 {
		autoRows, banner, _, err := ms.measure(ctx, append(serverArgs(cfg, mode, workers), "-auto"), onAuto, len(onMode), func(m *meter) {
			m.idleP99 = idleP99
		})
		rows = append(rows, autoRows...)
		if info == "" {
			info = spec + ": " + banner
		} else {
			info += " (auto: a server of its own, -auto)"
		}
		if err != nil {
			return rows, info, err
		}
	}
	if hog != nil {
		hogInfo, err := floorHogInfo(cfg, hog)
		if err != nil {
			return rows, info, fmt.Errorf("bench: mode %s: %w", spec, err)
		}
		info += hogInfo
	}
	if neighbor != nil {
		info += neighborInfo(cfg, cgs, l.shape.otherCPUs)
	}
	return rows, info, nil
}

// splitAutoSteps splits a mode's steps into those measured on the mode's
// server and auto, measured on a server of its own after them (the
// server's -auto changes how every route is served: its /checksum?sched=0
// would not be direct, nor sched=1 a task of its own).
func splitAutoSteps(steps []string) (onMode, onAuto []string) {
	for _, s := range steps {
		if s == StepAuto {
			onAuto = append(onAuto, s)
		} else {
			onMode = append(onMode, s)
		}
	}
	return onMode, onAuto
}

// modeServer starts the servers of one mode and measures steps on them.
type modeServer struct {
	cfg      Config
	l        *launcher
	place    childPlace
	quota    *cpuCgroup // the cgroup whose throttling the rows record, or nil
	spec     string     // the Config.Modes item
	phase    func(step string, i int, what string)
	stepDone func()
}

// measure starts a server with args where ms.place says, measures steps
// on it with a meter that setup completes, and stops the server; first
// is the index of steps[0] among the mode's steps, for phase. It returns
// the rows measured, the server's banner (with how its shutdown went,
// if not cleanly), the idle step's probe p99 (0 without one) and the
// first error. The server has exited whatever it returns.
func (ms modeServer) measure(ctx context.Context, args, steps []string, first int, setup func(*meter)) (rows []Result, banner string, idleP99 float64, err error) {
	spec := ms.spec
	name, args, err := ms.l.command(args)
	if err != nil {
		return nil, "", 0, fmt.Errorf("bench: mode %s: %w", spec, err)
	}
	srv, err := startServer(ctx, ms.place, name, args)
	if err != nil {
		return nil, "", 0, fmt.Errorf("bench: mode %s: %w", spec, err)
	}
	defer srv.stop()
	if err := ms.l.check(srv.cmd.Process.Pid, "the server", ms.place); err != nil {
		return nil, "", 0, fmt.Errorf("bench: mode %s: %w", spec, err)
	}
	banner = srv.banner

	m := newMeter(ms.cfg, srv.url, ms.quota, srv.cmd.Process.Pid)
	m.spec, m.log = spec, srv.log
	setup(m)
	defer m.close()
	for i, step := range steps {
		r, err := m.step(ctx, spec, step, func(what string) { ms.phase(step, first+i, what) })
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return rows, banner, m.idleP99, fmt.Errorf("bench: mode %s, step %s: %w", spec, step, err)
		}
		rows = append(rows, r)
		ms.stepDone()
	}
	// Close the clients' idle connections before the SIGTERM: a connection
	// dialed for a request that was then cancelled sits unused in a
	// client's pool, and http.Server.Shutdown waits up to 5 s for such a
	// connection (it has not sent a request yet), longer than stopGrace.
	m.close()
	if err := srv.stop(); err != nil && ctx.Err() == nil {
		// The rows are good; a server that did not shut down cleanly is
		// worth knowing about but does not void them.
		banner += " (shutdown: " + err.Error() + ")"
	}
	return rows, banner, m.idleP99, nil
}

// serverArgs returns the arguments of mode's server: the floor's gets
// neither workers nor a slice, since it never runs a task.
func serverArgs(cfg Config, mode string, workers int) []string {
	isolation := mode
	if mode == ModeFloor {
		isolation = cpusched.IsolationNone.String()
	}
	args := append(slices.Clone(cfg.ServerCmd[1:]), "-addr", "127.0.0.1:0", "-isolation", isolation, "-garbage", strconv.Itoa(cfg.Garbage))
	if mode == ModeFloor {
		return args
	}
	if workers == 0 {
		workers = cfg.Workers
	}
	if workers > 0 {
		args = append(args, "-workers", strconv.Itoa(workers))
	}
	if slices.Contains(cfg.stepsOf(mode), StepTenants) {
		args = append(args, "-groups", demo.FormatGroups(tenantGroups(cfg.Tenants)))
	}
	if cfg.Slice > 0 {
		args = append(args, "-slice", cfg.Slice.String())
	}
	return args
}
