// The meter: the steps of one mode against one server, each its loads,
// warm-up, measured window and settling.

package bench

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// The demo server's endpoints.
const (
	pathProbe     = "/delay1ms"
	pathHogDirect = "/checksum?sched=0"
	pathHogSched  = "/checksum?sched=1"
	pathHogNoCkpt = "/checksum?sched=1&checkpoint=0"
	// pathHogAuto is auto's CPU-heavy load: the direct path, its passes
	// each ending with a Checkpoint that is a no-op until Auto runs them
	// as a task.
	pathHogAuto = "/checksum?sched=0&checkpoint=1"
	// pathSmall and pathSmallDirect are the small requests' route, 10
	// passes (demo.SmallTaskPasses), a route of their own as a service's
	// small requests are: httpsched gives each route's tasks their own
	// kind (cpusched.WithKind), so that the scheduler does not take the
	// small requests for /checksum's long tasks.
	pathSmall       = "/checksumSmallTaskWithCpuWorker?sched=1"
	pathSmallDirect = "/checksumSmallTaskWithCpuWorker?sched=0"
	pathStats       = "/stats"
	// pathIO is io-heavy's fast route: a 500 us sleep (ioSleep), as the
	// /ping of the wrk check in docs/bench.md#the-busy-case.
	pathIO = "/delay?d=500us"
)

// The sleeps of the probe's and io-heavy's handlers, for the attribution
// of their traced requests (TestTracedSleeps checks them against the
// paths).
const (
	probeSleep = time.Millisecond
	ioSleep    = 500 * time.Microsecond
)

// meter runs the steps of one mode against one server.
type meter struct {
	cfg                                 Config
	base                                string
	probeClient, hogClient, smallClient *http.Client
	smallDirectClient, statsClient      *http.Client
	ioClient                            *http.Client
	sys                                 *sysstat.Reader
	cgroup                              *cpuCgroup // the server's, or nil
	serverPID                           int
	spec                                string  // the Config.Modes item measured
	idleP99                             float64 // the idle step's probe p99, ms
	// floorIOP99 is the floor's io-heavy p99 (ms) measured earlier in the
	// run, or 0: io-heavy's attribution threshold.
	floorIOP99 float64
	// floorHog, in the floor mode, is the process that runs the CPU-heavy
	// work in the server's stead; nil otherwise.
	floorHog *hogproc.Process
	// neighbor is the neighbour, in a mode with a neighbor step; nil
	// otherwise.
	neighbor *hogproc.Process
	// tenants is the run's tenants step, in a mode that measures it; nil
	// otherwise. tenantClient carries its clients' tasks, and launcher
	// starts the floor's processes of its groups; tenantRun is its load
	// while the step runs, nil otherwise.
	tenants      *tenantPlan
	tenantClient *http.Client
	launcher     *launcher
	tenantRun    *tenantRun
	// log is the server's turns to contended (nil: not read), and
	// lastEnd the end of the last step's window (zero before the first).
	log     *logWatch
	lastEnd time.Time
}

// newMeter returns the meter of the server at base, running as serverPID
// in cgroup cg (nil: none), with one HTTP client per load.
func newMeter(cfg Config, base string, cg *cpuCgroup, serverPID int) *meter {
	sys, _ := sysstat.NewReader("") // nil on systems without /proc: no CPU busy %
	return &meter{
		cfg:               cfg,
		base:              base,
		probeClient:       newClient(probeConcurrency(cfg.ProbeRate)),
		hogClient:         newClient(cfg.HogConcurrency),
		smallClient:       newClient(probeConcurrency(cfg.SmallRate)),
		smallDirectClient: newClient(probeConcurrency(cfg.SmallRate)),
		ioClient:          newClient(cfg.IOConcurrency),
		statsClient:       &http.Client{Timeout: 30 * time.Second},
		sys:               sys,
		cgroup:            cg,
		serverPID:         serverPID,
	}
}

// close closes the clients' idle connections.
func (m *meter) close() {
	for _, c := range []*http.Client{m.probeClient, m.hogClient, m.smallClient, m.smallDirectClient, m.ioClient, m.statsClient} {
		c.CloseIdleConnections()
	}
	if m.tenantClient != nil {
		m.tenantClient.CloseIdleConnections()
	}
}

// withTenants makes m measure plan's tenants step (nil: none), starting
// the floor's processes through l.
func (m *meter) withTenants(plan *tenantPlan, l *launcher) {
	if plan == nil {
		return
	}
	m.tenants, m.launcher = plan, l
	clients := 0
	for _, t := range plan.tenants {
		clients += t.Clients
	}
	m.tenantClient = newClient(clients)
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
	loads := m.loadsOf(step)
	var err error
	primed := 0 // auto's requests before its loads
	if step == StepAuto {
		phase("waiting for Auto to find /checksum heavy")
		if primed, err = m.primeAuto(ctx); err != nil {
			return res, err
		}
	}
	stop, err := m.startLoads(ctx, loads)
	// Stop the loads before leaving: on an early error (a failed /stats
	// read, a trace that cannot be read) the CPU-heavy load would otherwise
	// run on for its whole Duration.
	defer func() { _ = stop() }()
	if err != nil {
		return res, err
	}
	// Warm-up: the same loads, unmeasured.
	if m.cfg.Warmup > 0 {
		phase("warm-up")
		if _, _, err := runProbeAndSmall(ctx, loads.probe, loads.smallList(), m.cfg.Warmup); err != nil {
			return res, err
		}
	}
	phase("measuring")
	w, err := m.measure(ctx, step, loads, phase)
	if err != nil {
		return res, err
	}
	m.record(&res, step, loads, w)
	if res.Auto != nil {
		res.Auto.PrimeRequests = primed
	}

	// Stop the load and let the server finish what it was doing, so that
	// the next step starts from a quiet server.
	phase("settling")
	if err := stop(); err != nil {
		return res, err
	}
	return res, m.settle(ctx, loads.busy())
}

// window is what one measured window gave: the server's state at its two
// ends, the probe's and the small loads' results, and the file of the
// slow probe requests' attribution when it was traced.
type window struct {
	before, after      sample
	probe              *load.Result
	small, smallDirect *load.Result // as stepLoads's, or nil
	waited             *waitedRecorder
	attribution        string
	// afterPause and tailAfterPause count the responses that came after
	// the neighbour was paused at the window's end, and those of them
	// already in the tail then (neighborEnd).
	afterPause, tailAfterPause int64
}

// measure runs the measured window of step: it samples the server, runs
// the probe and the small loads over the window, traced where
// Config.TraceDir asks for it, samples the server again as the window
// ends, and then attributes the traced requests.
func (m *meter) measure(ctx context.Context, step string, loads stepLoads, phase func(string)) (window, error) {
	w := window{waited: newWaitedRecorder()}
	var err error
	if w.before, err = m.sample(ctx); err != nil {
		return w, err
	}
	// Every probe or small request due in the window counts, however late
	// it ends: the slowest are the ones still in flight when the window
	// closes.
	probe := loads.probe
	probe.Drain = probe.Rate > 0 // a closed loop has no due times to drain
	if loads.small != nil {
		small := *loads.small
		small.OnResponse = w.waited.record
		loads.small = &small
	}
	smallCfgs := loads.smallList()
	for i := range smallCfgs {
		smallCfgs[i].Drain = true
	}
	var tr *tracing
	if m.cfg.TraceDir != "" && tracedStep(step) {
		tr = m.startTrace(ctx, step, &probe)
	}
	var end *neighborEnd
	if loads.neighbor {
		endCtx, cancel := context.WithCancel(ctx)
		end = m.endNeighborWindow(endCtx, m.cfg.Step)
		defer func() { cancel(); <-end.done }()
		end.watch(&probe)
		for i := range smallCfgs {
			end.watch(&smallCfgs[i])
		}
	}
	var small []*load.Result
	if w.probe, small, err = runProbeAndSmall(ctx, probe, smallCfgs, m.cfg.Step); err != nil {
		return w, err
	}
	if loads.small != nil {
		w.small, small = small[0], small[1:]
	}
	if loads.smallDirect != nil {
		w.smallDirect = small[0]
	}
	if end == nil {
		// The window ends here: sample before the attribution, whose
		// seconds of CPU would otherwise count in the window (the
		// server's CPU-heavy load runs on meanwhile, and the guard reads
		// the attribution as another busy process). The neighbour's end
		// samples at the window's end itself.
		if w.after, err = m.sample(ctx); err != nil {
			return w, err
		}
	}
	if tr != nil {
		phase("attributing the slow requests")
		threshold, why := m.threshold(step, latencyResult(w.probe).P99Ms)
		if w.attribution, err = tr.finish(threshold, why); err != nil {
			return w, err
		}
	}
	if end != nil {
		w.after, err = end.wait()
		p99s := []float64{latencyResult(w.probe).P99Ms}
		for _, r := range []*load.Result{w.small, w.smallDirect} {
			if r != nil {
				p99s = append(p99s, latencyResult(r).P99Ms)
			}
		}
		w.afterPause, w.tailAfterPause = end.late(p99s...)
		return w, err
	}
	return w, nil
}

// tracedStep reports whether Config.TraceDir traces step: those with the
// CPU-heavy load through the scheduler beside the probe (auto's through
// Auto), io-heavy, the steps beside the neighbour, and tenants.
func tracedStep(step string) bool {
	switch step {
	case StepHogSched, StepHogNoCkpt, StepHogSchedSm, StepIOHeavy, StepNeighbor, StepNeighborAlone, StepNeighborNoCkpt, StepTenants, StepAuto:
		return true
	}
	return false
}

// threshold returns the client latency (ms) above which a traced request
// of step, whose own p99 was p99, is attributed, and where it comes from.
// Config.TraceAbove overrides it. The probe's is twice the idle step's
// p99. io-heavy's is twice the floor's io-heavy p99 in this run (in the
// floor, its own step's), so that every mode's slow requests are the same
// band above the reference the targets are set against; a mode with no
// floor measured before it takes its own p99, its slowest 1%.
func (m *meter) threshold(step string, p99 float64) (float64, string) {
	switch {
	case m.cfg.TraceAbove > 0:
		return float64(m.cfg.TraceAbove) / 1e6, "-trace-above"
	case step != StepIOHeavy && m.idleP99 > 0:
		return 2 * m.idleP99, "twice the idle step's p99"
	case step != StepIOHeavy:
		return p99, "this step's own p99: the idle step was not measured (-steps)"
	case m.spec == ModeFloor:
		return 2 * p99, "twice the floor's io-heavy p99, this step's"
	case m.floorIOP99 > 0:
		return 2 * m.floorIOP99, "twice the floor's io-heavy p99 in this run"
	}
	return p99, "this step's own p99: no floor measured before this mode"
}

// record fills the row res of step from its loads' window, and keeps the
// idle step's probe p99 for the attribution threshold.
func (m *meter) record(res *Result, step string, loads stepLoads, w window) {
	probe := latencyResult(w.probe)
	if loads.probe.Rate == 0 {
		probe.ClosedLoop, probe.Connections = true, loads.probe.Concurrency
	}
	res.Probe = &probe
	if step == StepIdle {
		m.idleP99 = probe.P99Ms
	}
	switch {
	case loads.hogPath != "":
		res.Hog = &HogResult{PassesPerS: w.after.passesPerSecondSince(w.before)}
	case loads.floorHog:
		res.Hog = &HogResult{PassesPerS: w.after.floorHog.PassesPerSecondSince(w.before.floorHog), FloorHog: true}
	}
	if w.small != nil {
		res.Small = smallResult(w.small)
		res.Small.WaitedP50Ms, res.Small.WaitedP99Ms, res.Small.WaitedMaxMs = w.waited.percentiles()
	}
	if w.smallDirect != nil {
		res.SmallDirect = smallResult(w.smallDirect)
	}
	if loads.neighbor {
		res.Neighbor = &NeighborResult{PassesPerS: w.after.neighbor.PassesPerSecondSince(w.before.neighbor), Threads: m.cfg.NeighborConcurrency,
			FinishedAfterPause: w.afterPause, TailAfterPause: w.tailAfterPause}
	}
	if m.sys != nil && w.before.sysOK && w.after.sysOK {
		busy := w.after.sys.Since(w.before.sys).Busy
		res.CPUBusyPct = &busy
	}
	res.GC = gcWindow(w.before.stats, w.after.stats)
	res.Lends, res.LentSlots = lending(w.before.stats, w.after.stats)
	res.ContendedPct = contention(w.before.stats, w.after.stats)
	res.Contentions = m.log.between(m.lastEnd, w.after.when, w.before.when)
	m.lastEnd = w.after.when
	res.ThreadsRaisable, res.RetiredThreads, res.LooseThreads = retirement(w.before.stats, w.after.stats)
	if m.cgroup != nil {
		res.CgroupCPU = w.after.cgroup.since(w.before.cgroup, w.after.when.Sub(w.before.when))
	}
	if loads.tenants && m.tenantRun != nil {
		res.Tenants = m.tenantRun.tenantsResult(w.before.tenants, w.after.tenants, w.after.when.Sub(w.before.when))
	}
	res.Attribution = w.attribution
	if step == StepAuto {
		res.Auto = autoResult(w.before.stats, w.after.stats)
	}
}

// settle waits, after a step's loads have stopped, until the server has
// finished the CPU-heavy work they left (busy), then for Config.Settle.
func (m *meter) settle(ctx context.Context, busy bool) error {
	if busy {
		if err := m.waitQuiet(ctx); err != nil {
			return err
		}
	}
	return sleepCtx(ctx, m.cfg.Settle)
}
