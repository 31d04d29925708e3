// The loads of a step: which run, how they start and stop, and the probe
// and the small requests run side by side over a window.

package bench

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/load"
)

// stepLoads are the loads of one step.
type stepLoads struct {
	hogPath string // the CPU-heavy closed loop's path, or "" for none
	// floorHog: the CPU-heavy load is the floor's hog process instead.
	floorHog bool
	// neighbor: the neighbour runs beside the server.
	neighbor bool
	probe    load.Config // the probe: open loop, or io-heavy's closed loop
	// small and smallDirect are the small requests through the scheduler
	// and run directly at the same rate (their reference); nil for none.
	small, smallDirect *load.Config
	// tenants: the tenants step's groups run (tenants.go); tenantClients:
	// as clients of the server, not the floor's processes.
	tenants, tenantClients bool
}

// busy reports whether the loads leave the server CPU-heavy work to
// finish after they stop.
func (l stepLoads) busy() bool {
	return l.hogPath != "" || l.small != nil || l.smallDirect != nil || l.tenantClients
}

// smallList returns the small loads to run: the scheduled ones first.
func (l stepLoads) smallList() []load.Config {
	var list []load.Config
	for _, c := range []*load.Config{l.small, l.smallDirect} {
		if c != nil {
			list = append(list, *c)
		}
	}
	return list
}

// loadsOf returns the loads of step, as its warm-up runs them. In the
// floor mode the CPU-heavy load is the floor's hog, wherever the other
// modes send theirs through the scheduler, and the small requests run
// directly only: the scheduled ones' work belongs with the hog there.
func (m *meter) loadsOf(step string) stepLoads {
	cfg := m.cfg
	l := stepLoads{probe: load.Config{
		URL: m.base + pathProbe, Concurrency: probeConcurrency(cfg.ProbeRate), Rate: cfg.ProbeRate,
		Client: m.probeClient,
	}, neighbor: withNeighbor(step)}
	switch step {
	case StepHogDirect:
		l.hogPath = pathHogDirect
	case StepHogSched, StepHogSchedSm, StepIOHeavy, StepNeighbor:
		l.hogPath = pathHogSched
	case StepHogNoCkpt, StepNeighborNoCkpt:
		l.hogPath = pathHogNoCkpt
	case StepAuto:
		l.hogPath = pathHogAuto
	}
	if m.floorHog != nil && l.hogPath != "" {
		l.hogPath, l.floorHog = "", true
	}
	if step == StepIOHeavy {
		l.probe = load.Config{URL: m.base + pathIO, Concurrency: cfg.IOConcurrency, Client: m.ioClient}
	}
	if step == StepTenants {
		l.tenants, l.tenantClients = true, m.spec != ModeFloor
	}
	if step == StepHogSchedSm || step == StepNeighbor || step == StepNeighborNoCkpt {
		small := load.Config{
			URL: m.base + pathSmall, Concurrency: probeConcurrency(cfg.SmallRate), Rate: cfg.SmallRate,
			Timeout: hogTimeout, Client: m.smallClient,
		}
		direct := small
		direct.URL, direct.Client = m.base+pathSmallDirect, m.smallDirectClient
		l.smallDirect = &direct
		if m.floorHog == nil {
			l.small = &small
		}
	}
	return l
}

// startLoads starts the background loads of loads: the neighbour, and the
// CPU-heavy load, if any: a closed loop on its path (its own counts are
// not used: throughput comes from the server's pass counter), or the
// floor's hog. It returns the function that stops them, which waits for
// the closed loop to end and pauses the processes; later calls return
// nil. On an error, what started is stopped by that function too.
func (m *meter) startLoads(ctx context.Context, loads stepLoads) (stop func() error, err error) {
	var stops []func() error
	var once sync.Once
	stop = func() (err error) {
		once.Do(func() {
			var errs []error
			for _, s := range stops {
				errs = append(errs, s())
			}
			err = errors.Join(errs...)
		})
		return err
	}
	if loads.neighbor {
		if _, err := m.neighbor.Run(ctx); err != nil {
			return stop, err
		}
		stops = append(stops, func() error { _, err := m.neighbor.Pause(ctx); return err })
	}
	if loads.tenants {
		if err := m.startTenants(ctx, loads.tenantClients); err != nil {
			return stop, err
		}
		stops = append(stops, m.stopTenants)
	}
	switch {
	case loads.floorHog:
		_, err = m.floorHog.Run(ctx)
		stops = append(stops, func() error { _, err := m.floorHog.Pause(ctx); return err })
	case loads.hogPath != "":
		hogCtx, cancel := context.WithCancel(ctx)
		var bg sync.WaitGroup
		bg.Go(func() {
			_, _ = load.Run(hogCtx, load.Config{
				URL: m.base + loads.hogPath, Concurrency: m.cfg.HogConcurrency, Duration: 24 * time.Hour,
				Timeout: hogTimeout, Client: m.hogClient,
			})
		})
		stops = append(stops, func() error { cancel(); bg.Wait(); return nil })
	}
	return stop, err
}

// startTenants starts the tenants step's groups: as clients of the
// server, or as the floor's processes (in the server's quota cgroup, if
// any, where they get no weighted ones).
func (m *meter) startTenants(ctx context.Context, clients bool) error {
	if m.tenants == nil {
		return errors.New("the tenants step has no plan (meter.withTenants)")
	}
	if clients {
		m.tenantRun = startTenantClients(ctx, m.tenants, m.base, m.tenantClient)
		return nil
	}
	r, err := startFloorTenants(ctx, m.tenants, m.launcher, m.cgroup)
	if err != nil {
		return err
	}
	m.tenantRun = r
	return nil
}

// stopTenants ends the tenants step's load (tenantRun.stop).
func (m *meter) stopTenants() error {
	if m.tenantRun == nil {
		return nil
	}
	err := m.tenantRun.stop(context.Background())
	m.tenantRun = nil
	return err
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
