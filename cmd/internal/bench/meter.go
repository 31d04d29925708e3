// The meter: the steps of one mode against one server, each its loads,
// warm-up, measured window and settling.

package bench

import (
	"context"
	"errors"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/load"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// The demo server's endpoints.
const (
	pathProbe       = "/delay1ms"
	pathHogDirect   = "/checksum?sched=0"
	pathHogSched    = "/checksum?sched=1"
	pathSmall       = "/checksum?n=10&sched=1"
	pathSmallDirect = "/checksum?n=10&sched=0"
	pathStats       = "/stats"
)

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
