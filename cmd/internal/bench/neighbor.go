// The neighbour: a CPU-bound process at normal priority beside the
// server, in the neighbor steps, and the cgroups of a mode's processes.

package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// withNeighbor reports whether step runs beside the neighbour.
func withNeighbor(step string) bool {
	return step == StepNeighbor || step == StepNeighborAlone || step == StepNeighborNoCkpt
}

// startNeighbor starts the neighbour, `ServerCmd[0] neighbor -c
// NeighborConcurrency`, paused, as l starts the servers, in cgroup cg
// unless that is nil, on the CPUs of the run's shape for it (-cpuset:
// those of bench, not the servers'). A variable, so that a test can count
// the starts.
var startNeighbor = func(ctx context.Context, cfg Config, l *launcher, cg *cpuCgroup) (*hogproc.Process, error) {
	return startHogProcess(ctx, l, []string{hogproc.NeighborCommand, "-c", strconv.Itoa(cfg.NeighborConcurrency)}, l.place(neighborRole, cg))
}

// startHogProcess starts l's program with args, a hogproc child, as l
// starts the servers, where place says, in a process group of its own (a
// Ctrl-C reaches only bench, which then stops it) and killed if bench
// dies, and waits for its Hello (hogproc.Start). On failure the child has
// been stopped.
func startHogProcess(ctx context.Context, l *launcher, args []string, place childPlace) (*hogproc.Process, error) {
	name, line, err := l.command(args)
	if err != nil {
		return nil, err
	}
	cmd := place.command(name, line)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	childproc.DieWithParent(cmd)
	var p *hogproc.Process
	err = place.start(func() (err error) {
		p, err = hogproc.Start(ctx, cmd)
		return err
	})
	if err != nil {
		if p != nil {
			_ = p.Stop()
		}
		return nil, err
	}
	if err := l.check(p.PID(), "the "+args[0]+" process", place); err != nil {
		_ = p.Stop()
		return nil, err
	}
	return p, nil
}

// neighborInfo describes the neighbour, on cpus (nil: bench's), for the
// servers line.
func neighborInfo(cfg Config, cgs modeCgroups, cpus []int) string {
	where := "in bench's cgroup"
	switch {
	case cgs.neighbor == nil:
	case cgs.neighbor == cgs.server:
		where = "in the server's cgroup " + cgs.server.dir
	default:
		where = "in a cgroup of its own " + cgs.neighbor.dir + ", the server in " + cgs.server.dir
	}
	if cpus != nil {
		where += ", on CPU " + FormatCPUs(cpus)
	}
	return fmt.Sprintf("; neighbour: %d CPU-bound goroutines at normal priority, %s", cfg.NeighborConcurrency, where)
}

// modeCgroups are the cgroups of one mode's processes; nil fields where
// they run in bench's own.
type modeCgroups struct {
	// server holds the server and the floor's hog: with CPUQuota, limited
	// to it; with Cgroups alone, unlimited.
	server *cpuCgroup
	// neighbor is the neighbour's: with Cgroups a cgroup of its own, else
	// the server's.
	neighbor *cpuCgroup
}

// newModeCgroups makes the cgroups of a mode under cgroups (nil: none, and
// no cgroup is made) as cfg asks. On failure it returns what it made, for
// remove.
func newModeCgroups(cfg Config, cgroups *cgroupFS) (modeCgroups, error) {
	var cgs modeCgroups
	if cgroups == nil {
		return cgs, nil
	}
	var err error
	if cgs.server, err = cgroups.create(nextCgroupName(), cfg.CPUQuota); err != nil {
		return cgs, err
	}
	cgs.neighbor = cgs.server
	if cfg.Cgroups {
		if cgs.neighbor, err = cgroups.create(nextCgroupName(), 0); err != nil {
			cgs.neighbor = nil
			return cgs, fmt.Errorf("the neighbour's cgroup: %w", err)
		}
	}
	return cgs, nil
}

// remove removes the cgroups made, once the processes in them have exited.
func (cgs modeCgroups) remove() error {
	var errs []error
	if cgs.neighbor != nil && cgs.neighbor != cgs.server {
		errs = append(errs, cgs.neighbor.remove())
	}
	if cgs.server != nil {
		errs = append(errs, cgs.server.remove())
	}
	return errors.Join(errs...)
}

// NeighborResult is the neighbour's own throughput over a step's measured
// window: CRC32 passes per second, its count (hogproc.Count).
type NeighborResult struct {
	PassesPerS float64 `json:"passes_per_s"`
	Threads    int     `json:"threads"` // Config.NeighborConcurrency
	// FinishedAfterPause counts the probe's and the small requests due in
	// the window that finished only after the neighbour was paused at its
	// end (neighborEnd), and TailAfterPause those of them that had already
	// waited longer than their load's p99 when it was paused: where that
	// is not 0, the step's tail latencies are lower bounds. (A few requests
	// due in the window's last ms always finish after it.)
	FinishedAfterPause int64 `json:"finished_after_pause"`
	TailAfterPause     int64 `json:"tail_after_pause"`
}

// neighborEnd ends the measured window of a step beside the neighbour: at
// the window's end it reads the server's state (the row's figures are the
// window's, as in the other steps) and then pauses the neighbour, before
// the requests due in the window have all finished. Left running, a
// neighbour that starves the server would hold the drain for as long as
// it starves it: an independent check measured small requests waiting 58 s, and a
// -quick run took 69 s instead of 45 for one such step. The requests that
// finish after the pause are recorded with how long they had waited at
// the pause (NeighborResult.FinishedAfterPause, TailAfterPause).
type neighborEnd struct {
	done     chan struct{} // closed once the neighbour is paused, or on failure
	after    sample        // the window's end, set before done closes
	err      error         // set before done closes
	pausedAt atomic.Int64  // when the pause was sent, unix ns; 0 before

	mu sync.Mutex
	// waited holds, for each watched load (in watch's order), how long
	// each of its requests that ended after the pause had waited at it.
	waited [][]time.Duration
}

// endNeighborWindow starts the neighborEnd of a window of length d that
// starts now; ctx's end stops it.
func (m *meter) endNeighborWindow(ctx context.Context, d time.Duration) *neighborEnd {
	e := &neighborEnd{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		if e.err = sleepCtx(ctx, d); e.err != nil {
			return
		}
		if e.after, e.err = m.sample(ctx); e.err != nil {
			return
		}
		e.pausedAt.Store(time.Now().UnixNano())
		if _, err := m.neighbor.Pause(ctx); err != nil {
			e.err = fmt.Errorf("the neighbour: %w", err)
		}
	}()
	return e
}

// watch makes c record its responses that end after the pause, as the
// next load of e.
func (e *neighborEnd) watch(c *load.Config) {
	next := c.OnResponse
	e.mu.Lock()
	i := len(e.waited)
	e.waited = append(e.waited, nil)
	e.mu.Unlock()
	c.OnResponse = func(r load.Response) {
		if p := e.pausedAt.Load(); p != 0 && r.Done.UnixNano() > p {
			due := r.Done.Add(-r.Latency)
			e.mu.Lock()
			e.waited[i] = append(e.waited[i], time.Unix(0, p).Sub(due))
			e.mu.Unlock()
		}
		if next != nil {
			next(r)
		}
	}
}

// late returns how many responses of the watched loads ended after the
// pause, and how many of those had waited longer than their load's p99
// (p99s, in watch's order, ms) at it.
func (e *neighborEnd) late(p99s ...float64) (all, tail int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, waits := range e.waited {
		all += int64(len(waits))
		for _, w := range waits {
			if i < len(p99s) && float64(w)/1e6 > p99s[i] {
				tail++
			}
		}
	}
	return all, tail
}

// wait returns the window's end once the neighbour is paused.
func (e *neighborEnd) wait() (sample, error) {
	<-e.done
	return e.after, e.err
}
