// Package bench runs the mixed-workload benchmark behind `cpusched bench`:
// the demo server's 1 ms endpoint measured under CPU load, isolation mode
// beside isolation mode.
//
// For each mode, Run starts the demo server as a child process (so that the
// load generator does not share the server's Go runtime), waits until it
// answers, and runs four steps of equal length, each after a short unmeasured
// warm-up:
//
//	idle             the probe alone: open loop at ProbeRate on /delay1ms
//	hog-direct       + closed loop of HogConcurrency on /checksum?sched=0
//	hog-sched        the same CPU load through cpusched (/checksum?sched=1)
//	hog-sched+small  + open loop at SmallRate on /checksum?n=10&sched=1, and
//	                 the same small requests at the same rate with sched=0
//
// The probe's and the small requests' latencies count from each request's
// due time (see package load). The small requests run directly (sched=0)
// are the floor: what this machine gives a small request under this load
// without cpusched. The scheduled ones also report their task's Task.Waited
// (the demo's Cpusched-Waited-Ns header): the queueing delay the scheduler
// itself added.
// CPU-heavy throughput is the server's own count of CRC32 passes over the
// measured window, so requests still in flight at the window's end count for
// the work they did. Between steps the previous step's load is cancelled and
// Run waits until the server has stopped working on it.
//
// With CPUQuota set, each server runs in a cgroup of its own with that CPU
// bandwidth limit (see cgroup.go), and each row records the cgroup's
// throttling over the measured window.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/cmd/internal/report"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// Defaults and limits of Config.
const (
	DefaultStep           = 7 * time.Second
	DefaultWarmup         = 500 * time.Millisecond
	DefaultSettle         = 200 * time.Millisecond
	DefaultProbeRate      = 200
	DefaultHogConcurrency = 10
	DefaultSmallRate      = 200

	// QuickWarmup is the warm-up of a -quick run.
	QuickWarmup = 250 * time.Millisecond

	MinStep        = 100 * time.Millisecond
	MaxStep        = 10 * time.Minute
	MaxWarmup      = time.Minute
	MaxSettle      = 10 * time.Second
	MaxProbeRate   = 10000
	MaxSmallRate   = 10000
	MaxConcurrency = 1000
	MinTraceAbove  = time.Microsecond
	MaxTraceAbove  = time.Minute
)

// quickBudget is the time a -quick run may spend in its steps (start-up and
// settling come on top); QuickStep divides it between the steps.
const quickBudget = 20 * time.Second

// Step names, in the order Run measures them.
const (
	StepIdle       = "idle"
	StepHogDirect  = "hog-direct"
	StepHogSched   = "hog-sched"
	StepHogSchedSm = "hog-sched+small"
)

// Steps returns the step names in the order Run measures them.
func Steps() []string {
	return []string{StepIdle, StepHogDirect, StepHogSched, StepHogSchedSm}
}

// The demo server's endpoints.
const (
	pathProbe       = "/delay1ms"
	pathHogDirect   = "/checksum?sched=0"
	pathHogSched    = "/checksum?sched=1"
	pathSmall       = "/checksum?n=10&sched=1"
	pathSmallDirect = "/checksum?n=10&sched=0"
	pathStats       = "/stats"
)

// QuickStep returns the step length of a -quick run over modes isolation
// modes: 2 s, shortened (to no less than 1 s) so that the steps of all modes
// fit in about 20 s and the whole run, with `go run`'s build and the
// servers' start-ups, in under 30 s (docs/performance.md, "Tools").
func QuickStep(modes int) time.Duration {
	if modes < 1 {
		modes = 1
	}
	perStep := quickBudget/time.Duration(modes*len(Steps())) - QuickWarmup - DefaultSettle
	step := min(2*time.Second, perStep.Truncate(500*time.Millisecond))
	return max(step, time.Second)
}

// Config describes one benchmark run. Start from DefaultConfig; the zero
// value is not valid (ServerCmd, Step, ProbeRate and the concurrencies are
// required).
type Config struct {
	// ServerCmd is the command that runs the demo server, e.g.
	// {"/path/to/cpusched", "serve"}. Run appends
	// "-addr 127.0.0.1:0 -isolation MODE" (and "-gc" when GC is set); the
	// server must print "listening on http://HOST:PORT" on stdout.
	ServerCmd []string
	// Modes are the isolation modes to measure, by name, in order; nil means
	// every mode of cpusched.IsolationModes. "MODE:N" measures MODE with N
	// workers (overriding Workers for that server), so that one mode can be
	// measured beside itself with another worker count: "ospriority,ospriority:1".
	Modes []string
	// Step is the measured length of each step (MinStep..MaxStep).
	Step time.Duration
	// Warmup runs each step's load unmeasured before its window (0..MaxWarmup).
	Warmup time.Duration
	// Settle is the pause after a step's load has stopped (0..MaxSettle).
	Settle time.Duration
	// ProbeRate is the probe's open-loop rate in requests/s (1..MaxProbeRate).
	ProbeRate float64
	// HogConcurrency is the CPU-heavy closed loop's concurrency (1..MaxConcurrency).
	HogConcurrency int
	// SmallRate is the open-loop rate of the small requests, in requests/s
	// (1..MaxSmallRate), for each of the scheduled and the direct ones.
	SmallRate float64
	// GC passes -gc to the server (garbage per probe request).
	GC bool
	// Workers and Slice, when non-zero, are passed to every server as
	// -workers and -slice, overriding each mode's own choice.
	Workers int
	Slice   time.Duration
	// CPUQuota, when non-zero, runs every server in a cgroup of its own
	// limited to this many CPUs (MinCPUQuota..runtime.NumCPU()), with a
	// 100 ms period: cpu.max on cgroup v2, cpu.cfs_quota_us on v1. Linux
	// only, and it needs the right to make cgroups (root); Run reports
	// ErrCPUQuota otherwise. The load generator stays outside.
	CPUQuota float64
	// Quick is recorded in the report's config; the caller sets Step and
	// Warmup for a quick run (QuickStep, QuickWarmup).
	Quick bool
	// TraceDir, when set, records a runtime/trace of each server over the
	// measured windows of the hog-sched and hog-sched+small steps (through
	// its /debug/pprof/trace) and attributes every probe request slower
	// than twice the idle step's p99 to its causes (package tailtrace):
	// DIR/MODE-STEP.trace and DIR/MODE-STEP.txt. The tracing itself costs
	// the server some CPU and latency.
	TraceDir string
	// TraceAbove, when non-zero, is the client latency above which a traced
	// probe request is attributed, instead of twice the idle step's p99
	// (MinTraceAbove..MaxTraceAbove): to look at the band just above a
	// target, say 1.5x idle. It needs TraceDir.
	TraceAbove time.Duration
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
	case math.IsNaN(c.SmallRate) || c.SmallRate < 1 || c.SmallRate > MaxSmallRate:
		return fmt.Errorf("bench: SmallRate (-small-rate) must be in 1..%d requests/s, got %v", MaxSmallRate, c.SmallRate)
	case c.CPUQuota != 0 && !(c.CPUQuota >= MinCPUQuota && c.CPUQuota <= float64(runtime.NumCPU())):
		return fmt.Errorf("bench: CPUQuota (-cpu-quota) must be 0 (no quota) or in %g..%d CPUs, got %g", MinCPUQuota, runtime.NumCPU(), c.CPUQuota)
	case c.TraceAbove != 0 && (c.TraceAbove < MinTraceAbove || c.TraceAbove > MaxTraceAbove):
		return fmt.Errorf("bench: TraceAbove (-trace-above) must be 0 (twice the idle p99) or in %v..%v, got %v", MinTraceAbove, MaxTraceAbove, c.TraceAbove)
	case c.TraceAbove != 0 && c.TraceDir == "":
		return fmt.Errorf("bench: TraceAbove (-trace-above) %v needs TraceDir (-trace DIR): only traced requests are attributed", c.TraceAbove)
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
	if _, err := cpusched.ParseIsolation(mode); err != nil {
		return "", 0, fmt.Errorf("unknown isolation mode %q (valid: %s; MODE:N for N workers)", spec, strings.Join(AllModes(), ", "))
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

// AllModes returns the names of every isolation mode this build supports,
// in the order Run measures them by default.
func AllModes() []string { return demo.ModeNames() }

func (c Config) modes() []string {
	if len(c.Modes) == 0 {
		return AllModes()
	}
	return c.Modes
}

// Run validates cfg and measures every mode in turn, each on a fresh server
// process. It returns the report of the rows measured so far together with
// the first error: a server that fails to start, a failed /stats read, or
// ctx.Err() when ctx is cancelled (Ctrl-C). An invalid cfg returns
// (nil, error) and starts nothing. On every return the server processes it
// started have exited (SIGTERM, then SIGKILL after a grace period), and
// the cgroups it made for CPUQuota are removed. With CPUQuota set, Run
// first checks that the servers can run under it; if they cannot, it
// returns (nil, an error wrapping ErrCPUQuota) and starts nothing.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	rep := &Report{Machine: machineInfo(), Config: reportConfig(cfg)}
	var cgroups *cgroupFS
	if cfg.CPUQuota > 0 {
		var err error
		if cgroups, err = openCPUQuota(cfg.CPUQuota); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		rep.Config.Cgroup = cgroups.String()
	}
	if cfg.TraceDir != "" {
		if err := os.MkdirAll(cfg.TraceDir, 0o755); err != nil {
			return nil, fmt.Errorf("bench: TraceDir (-trace): %w", err)
		}
	}
	modes := cfg.modes()
	steps := Steps()
	prog := newTracker(cfg, len(modes)*len(steps))
	defer cfg.Progress.Done()
	for mi, mode := range modes {
		if err := ctx.Err(); err != nil {
			// Cancelled before this mode: start no server for it.
			rep.fillPctOfDirect()
			return rep, err
		}
		prog.set("%s (mode %d/%d): starting the server", mode, mi+1, len(modes))
		rows, srvInfo, err := runMode(ctx, cfg, cgroups, mode, func(step string, si int, phase string) {
			prog.set("%s (mode %d/%d) %s (step %d/%d): %s", mode, mi+1, len(modes), step, si+1, len(steps), phase)
		}, prog.stepDone)
		rep.Results = append(rep.Results, rows...)
		if srvInfo != "" {
			rep.Servers = append(rep.Servers, srvInfo)
		}
		if err != nil {
			rep.fillPctOfDirect()
			return rep, err
		}
	}
	rep.fillPctOfDirect()
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

func newTracker(cfg Config, steps int) *tracker {
	return &tracker{p: cfg.Progress, start: time.Now(), perStep: cfg.Warmup + cfg.Step + cfg.Settle, total: steps}
}

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

func (t *tracker) stepDone() {
	t.mu.Lock()
	t.done++
	t.mu.Unlock()
}

// runMode measures every step of one mode (a Config.Modes item) on a fresh
// server, in a new cgroup of cgroups unless that is nil. It returns the rows
// measured, the server's description ("mode: ...") and the first error.
func runMode(ctx context.Context, cfg Config, cgroups *cgroupFS, spec string, phase func(step string, i int, what string), stepDone func()) (rows []Result, info string, err error) {
	mode, workers, _ := parseModeSpec(spec) // Validate has checked it
	if workers == 0 {
		workers = cfg.Workers
	}
	args := append(slices.Clone(cfg.ServerCmd[1:]), "-addr", "127.0.0.1:0", "-isolation", mode)
	if cfg.GC {
		args = append(args, "-gc")
	}
	if workers > 0 {
		args = append(args, "-workers", strconv.Itoa(workers))
	}
	if cfg.Slice > 0 {
		args = append(args, "-slice", cfg.Slice.String())
	}
	var cg *cpuCgroup
	if cgroups != nil {
		if cg, err = cgroups.create(nextCgroupName(), cfg.CPUQuota); err != nil {
			return nil, "", fmt.Errorf("bench: mode %s: %w", spec, err)
		}
		// Runs after srv.stop below has reaped the server.
		defer func() {
			if rmErr := cg.remove(); rmErr != nil {
				err = errors.Join(err, fmt.Errorf("bench: mode %s: %w", spec, rmErr))
			}
		}()
	}
	srv, err := startServer(ctx, cg, cfg.ServerCmd[0], args)
	if err != nil {
		return nil, "", fmt.Errorf("bench: mode %s: %w", spec, err)
	}
	defer srv.stop()
	info = spec + ": " + srv.banner

	m := newMeter(cfg, srv.url, cg, srv.cmd.Process.Pid)
	m.spec = spec
	defer m.close()
	for i, step := range Steps() {
		r, err := m.step(ctx, spec, step, func(what string) { phase(step, i, what) })
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return rows, info, fmt.Errorf("bench: mode %s, step %s: %w", spec, step, err)
		}
		rows = append(rows, r)
		stepDone()
	}
	// Close the clients' idle connections before the SIGTERM: a connection
	// dialed for a request that was then cancelled sits unused in a
	// client's pool, and http.Server.Shutdown waits up to 5 s for such a
	// connection (it has not sent a request yet), longer than stopGrace.
	m.close()
	if err := srv.stop(); err != nil && ctx.Err() == nil {
		// The rows are good; a server that did not shut down cleanly is
		// worth knowing about but does not void them.
		info += " (shutdown: " + err.Error() + ")"
	}
	return rows, info, nil
}

// meter runs the steps of one mode against one server.
type meter struct {
	cfg                                 Config
	base                                string
	probeClient, hogClient, smallClient *http.Client
	smallDirectClient, statsClient      *http.Client
	sys                                 *sysstat.Reader
	cgroup                              *cpuCgroup // the server's, or nil
	serverPID                           int
	spec                                string  // the Config.Modes item measured
	idleP99                             float64 // the idle step's probe p99, ms
}

func newMeter(cfg Config, base string, cg *cpuCgroup, serverPID int) *meter {
	sys, _ := sysstat.NewReader("") // nil on systems without /proc: no CPU busy %
	return &meter{
		cfg:               cfg,
		base:              base,
		probeClient:       newClient(probeConcurrency(cfg.ProbeRate)),
		hogClient:         newClient(cfg.HogConcurrency),
		smallClient:       newClient(probeConcurrency(cfg.SmallRate)),
		smallDirectClient: newClient(probeConcurrency(cfg.SmallRate)),
		statsClient:       &http.Client{Timeout: 30 * time.Second},
		sys:               sys,
		cgroup:            cg,
		serverPID:         serverPID,
	}
}

func (m *meter) close() {
	for _, c := range []*http.Client{m.probeClient, m.hogClient, m.smallClient, m.smallDirectClient, m.statsClient} {
		c.CloseIdleConnections()
	}
}

// newClient returns a keep-alive HTTP/1.1 client for conns connections to
// loopback. One client per load lasts the whole mode, so that the warm-up's
// connections serve the measured window.
func newClient(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// probeConcurrency is the probe's cap on requests in flight: enough for a
// quarter of a second's requests, so that a stalled server is met with
// requests rather than a full queue (they are charged from their due time
// either way).
func probeConcurrency(rate float64) int {
	return min(max(8, int(math.Ceil(rate/4))), load.MaxConcurrency)
}

// hogTimeout is the per-request timeout of the CPU-heavy load: a request
// queued behind others in a one-worker scheduler may wait many seconds.
const hogTimeout = 2 * time.Minute

// step measures one step: background loads and warm-up, then the measured
// window, then stops the loads and waits for the server to go quiet.
func (m *meter) step(ctx context.Context, mode, step string, phase func(string)) (Result, error) {
	res := Result{Mode: mode, Step: step}
	cfg := m.cfg
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var bg sync.WaitGroup
	defer bg.Wait()

	hogPath := ""
	switch step {
	case StepHogDirect:
		hogPath = pathHogDirect
	case StepHogSched, StepHogSchedSm:
		hogPath = pathHogSched
	}
	if hogPath != "" {
		bg.Add(1)
		go func() {
			defer bg.Done()
			// Runs until stopLoad; its own counts are not used (throughput
			// comes from the server's pass counter).
			_, _ = load.Run(loadCtx, load.Config{
				URL: m.base + hogPath, Concurrency: cfg.HogConcurrency, Duration: 24 * time.Hour,
				Timeout: hogTimeout, Client: m.hogClient,
			})
		}()
	}
	small := step == StepHogSchedSm
	probeCfg := load.Config{
		URL: m.base + pathProbe, Concurrency: probeConcurrency(cfg.ProbeRate), Rate: cfg.ProbeRate,
		Client: m.probeClient,
	}
	smallCfg := load.Config{
		URL: m.base + pathSmall, Concurrency: probeConcurrency(cfg.SmallRate), Rate: cfg.SmallRate,
		Timeout: hogTimeout, Client: m.smallClient,
	}
	smallDirectCfg := smallCfg
	smallDirectCfg.URL, smallDirectCfg.Client = m.base+pathSmallDirect, m.smallDirectClient
	var smallCfgs []load.Config
	if small {
		smallCfgs = []load.Config{smallCfg, smallDirectCfg}
	}

	// Warm-up: the same loads, unmeasured.
	if cfg.Warmup > 0 {
		phase("warm-up")
		if _, _, err := runProbeAndSmall(loadCtx, probeCfg, smallCfgs, cfg.Warmup); err != nil {
			return res, err
		}
	}

	// The measured window.
	phase("measuring")
	before, err := m.sample(ctx)
	if err != nil {
		return res, err
	}
	// Every probe or small request due in the window counts, however late
	// it ends: the slowest are the ones still in flight when the window
	// closes.
	probeCfg.Drain = true
	waited := newWaitedRecorder()
	for i := range smallCfgs {
		smallCfgs[i].Drain = true
	}
	if small {
		smallCfgs[0].OnResponse = waited.record
	}
	var tr *tracing
	if cfg.TraceDir != "" && (step == StepHogSched || step == StepHogSchedSm) {
		tr = m.startTrace(ctx, step, &probeCfg)
	}
	probeRes, smallRes, err := runProbeAndSmall(loadCtx, probeCfg, smallCfgs, cfg.Step)
	if err != nil {
		return res, err
	}
	if tr != nil {
		phase("attributing the slow probe requests")
		threshold, why := 2*m.idleP99, "twice the idle step's p99"
		if cfg.TraceAbove > 0 {
			threshold, why = float64(cfg.TraceAbove)/1e6, "-trace-above"
		}
		if res.Attribution, err = tr.finish(threshold, why); err != nil {
			return res, err
		}
	}
	after, err := m.sample(ctx)
	if err != nil {
		return res, err
	}

	probe := latencyResult(probeRes)
	res.Probe = &probe
	if step == StepIdle {
		m.idleP99 = probe.P99Ms
	}
	if hogPath != "" {
		res.Hog = &HogResult{PassesPerS: after.passesPerSecondSince(before)}
	}
	if small {
		res.Small = smallResult(smallRes[0])
		res.Small.WaitedP50Ms, res.Small.WaitedP99Ms, res.Small.WaitedMaxMs = waited.percentiles()
		res.SmallDirect = smallResult(smallRes[1])
	}
	if m.sys != nil && before.sysOK && after.sysOK {
		busy := after.sys.Since(before.sys).Busy
		res.CPUBusyPct = &busy
	}
	res.GCStopMaxMs = gcStopMax(after.stats)
	if m.cgroup != nil {
		res.CgroupCPU = after.cgroup.since(before.cgroup, after.when.Sub(before.when))
	}

	// Stop the load and let the server finish what it was doing, so that
	// the next step starts from a quiet server.
	phase("settling")
	stopLoad()
	bg.Wait()
	if hogPath != "" || small {
		if err := m.waitQuiet(ctx); err != nil {
			return res, err
		}
	}
	if err := sleepCtx(ctx, cfg.Settle); err != nil {
		return res, err
	}
	return res, nil
}

// runProbeAndSmall runs the probe and the small loads side by side for d
// and returns their results. A load that cannot run at all (bad config) or
// ctx's cancellation is an error.
func runProbeAndSmall(ctx context.Context, probeCfg load.Config, smallCfgs []load.Config, d time.Duration) (*load.Result, []*load.Result, error) {
	smallRes := make([]*load.Result, len(smallCfgs))
	smallErrs := make([]error, len(smallCfgs))
	var wg sync.WaitGroup
	for i, c := range smallCfgs {
		c.Duration = d
		wg.Add(1)
		go func() {
			defer wg.Done()
			smallRes[i], smallErrs[i] = load.Run(ctx, c)
		}()
	}
	probeCfg.Duration = d
	probeRes, probeErr := load.Run(ctx, probeCfg)
	wg.Wait()
	if err := errors.Join(append(smallErrs, probeErr)...); err != nil {
		return nil, nil, err
	}
	return probeRes, smallRes, nil
}

// latencyResult summarizes one open-loop load: rate, latency from due
// time, and failed or non-2xx requests.
func latencyResult(r *load.Result) ProbeResult {
	s := r.Summary()
	return ProbeResult{RPS: s.RPS, P50Ms: s.P50Ms, P99Ms: s.P99Ms, P999Ms: s.P999Ms, MaxMs: s.MaxMs, Errors: s.Failed + s.Non2xx}
}

// smallResult summarizes one small load.
func smallResult(r *load.Result) *SmallResult {
	return &SmallResult{ProbeResult: latencyResult(r)}
}

// waitedRecorder collects the scheduled small requests' Task.Waited from
// the demo's response header.
type waitedRecorder struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram // microseconds
}

func newWaitedRecorder() *waitedRecorder {
	return &waitedRecorder{hist: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

func (w *waitedRecorder) record(r load.Response) {
	ns, err := strconv.ParseInt(r.Header.Get(demo.WaitedHeader), 10, 64)
	if err != nil || ns < 0 {
		return // not a scheduled response (a 503, say)
	}
	w.mu.Lock()
	_ = w.hist.RecordValue(max(1, ns/1e3))
	w.mu.Unlock()
}

// percentiles returns the p50, p99 and max of the recorded waits in ms, or
// nils when none was recorded.
func (w *waitedRecorder) percentiles() (p50, p99, maxMs *float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hist.TotalCount() == 0 {
		return nil, nil, nil
	}
	ms := func(us int64) *float64 { v := float64(us) / 1e3; return &v }
	return ms(w.hist.ValueAtQuantile(50)), ms(w.hist.ValueAtQuantile(99)), ms(w.hist.Max())
}

// sample is the state read at one end of a measured window.
type sample struct {
	when   time.Time
	stats  serverStats
	sys    sysstat.System
	sysOK  bool
	cgroup cpuStat // the server cgroup's, if any
}

func (m *meter) sample(ctx context.Context) (sample, error) {
	var s sample
	if m.sys != nil {
		var err error
		s.sys, err = m.sys.Sample()
		s.sysOK = err == nil
	}
	if m.cgroup != nil {
		var err error
		if s.cgroup, err = m.cgroup.readStat(); err != nil {
			return s, fmt.Errorf("reading the server cgroup's cpu.stat: %w", err)
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", m.serverPID))
		if err == nil {
			s.cgroup.serverCPU, err = parseProcCPUTime(stat)
		}
		if err != nil {
			return s, fmt.Errorf("reading the server's CPU time: %w", err)
		}
	}
	st, err := fetchStats(ctx, m.statsClient, m.base)
	if err != nil {
		return s, err
	}
	s.stats = st
	s.when = time.Now()
	return s, nil
}

// passesPerSecondSince returns the server's CRC32 passes per second between
// two samples, timed by the server's own clock (its uptime at each /stats
// snapshot) where it reports one, else by when the answers arrived.
func (later sample) passesPerSecondSince(earlier sample) float64 {
	sec := later.stats.Uptime - earlier.stats.Uptime
	if later.stats.Uptime <= 0 || earlier.stats.Uptime <= 0 {
		sec = later.when.Sub(earlier.when).Seconds()
	}
	if sec <= 0 || later.stats.Passes < earlier.stats.Passes {
		return 0
	}
	return float64(later.stats.Passes-earlier.stats.Passes) / sec
}

// quietPoll and quietTimeout bound waitQuiet.
const (
	quietPoll    = 50 * time.Millisecond
	quietTimeout = 60 * time.Second
)

// waitQuiet waits until the server's pass counter stops moving: CPU-heavy
// requests whose client has gone may run on to their end. It gives up
// silently after quietTimeout (the next step then starts on a busy server)
// and returns only ctx's or /stats's errors.
func (m *meter) waitQuiet(ctx context.Context) error {
	deadline := time.Now().Add(quietTimeout)
	last := int64(-1)
	for time.Now().Before(deadline) {
		st, err := fetchStats(ctx, m.statsClient, m.base)
		if err != nil {
			return err
		}
		if st.Passes == last {
			return nil
		}
		last = st.Passes
		if err := sleepCtx(ctx, quietPoll); err != nil {
			return err
		}
	}
	return nil
}

// sleepCtx sleeps for d or until ctx is done, and returns ctx.Err() then.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
