// The server's state at the ends of a measured window, and waiting for the
// server to go quiet between steps.

package bench

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// sample is the state read at one end of a measured window.
type sample struct {
	when   time.Time
	stats  serverStats
	sys    sysstat.System
	sysOK  bool
	cgroup cpuStat // the server cgroup's, if any
	// floorHog is the floor's hog's count, in the floor mode.
	floorHog hogproc.Count
	// neighbor is the neighbour's count, in a mode with a neighbour.
	neighbor hogproc.Count
	// tenants are the groups' states, while the tenants step runs.
	tenants []tenantSample
}

// sample reads the machine's CPU times, the server cgroup's and process's
// CPU accounting (with a CPU quota), the server's /stats, and the floor's
// hog's and the neighbour's counts.
func (m *meter) sample(ctx context.Context) (sample, error) {
	var s sample
	var err error
	if m.floorHog != nil {
		if s.floorHog, err = m.floorHog.Count(ctx); err != nil {
			return s, err
		}
	}
	if m.neighbor != nil {
		if s.neighbor, err = m.neighbor.Count(ctx); err != nil {
			return s, fmt.Errorf("the neighbour: %w", err)
		}
	}
	if m.sys != nil {
		s.sys, err = m.sys.Sample()
		s.sysOK = err == nil
	}
	if m.cgroup != nil {
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
	if m.tenantRun != nil {
		if s.tenants, err = m.tenantRun.sample(st); err != nil {
			return s, err
		}
	}
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
