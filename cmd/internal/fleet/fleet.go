// Package fleet is `cpusched fleet`: replicas of a gRPC demo service, each
// its own child process behind grpcsched, driven open loop by one grpc-go
// client through grpc-go's own balancer, to show what cpusched's load
// reports (docs/grpc.md) do to a fleet against round robin and against a
// balancer fed by the CPU alone.
//
// Each row is a scenario under a policy: the quota
// scenario gives the first replica a smaller cgroup CPU quota than the
// others; the batch scenario runs equal replicas, the first of which also
// runs a batch job at ClassIdle through its own scheduler; the neighbor
// scenario runs equal replicas under equal quotas, the first of which
// shares its cgroup with a CPU-bound process at normal priority. The policies
// are round_robin, weighted_round_robin on the replicas' reports as
// grpcsched makes them, and weighted_round_robin on reports without
// application_utilization (cpu_utilization and qps alone). The replicas
// schedule their calls through cpusched in every row: only the reports
// differ, so that the rows compare what the balancer is told.
//
// A row's measured time is split into rounds: each round runs one segment
// of every policy of the scenario, one after another on fresh replicas,
// and a row merges its policy's segments (rounds.go). The noise of a
// shared machine drifts over tens of seconds; interleaved, each policy
// sees as much of it as the others, where rows run one after the other
// would each see a stretch of their own.
//
// Everything stays on the machine: the replicas listen on 127.0.0.1, the
// client dials loopback addresses only, a segment stops by itself after
// its warm-up, measured time and the last call's deadline, and the
// replicas die with the process (childproc.DieWithParent) and are
// stopped, and their cgroups removed, at the end of each segment.
package fleet

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/hogproc"
	"github.com/cpusched/cpusched/cmd/internal/sysstat"
)

// ErrNothingToRun is wrapped by Run's error when no scenario it was asked
// for can run here (the quota and neighbor scenarios without cgroups): it
// starts nothing.
var ErrNothingToRun = errors.New("no scenario can run here")

// Run validates cfg, measures every scenario under every policy, and
// writes the tables, the JSON and the plots as cfg asks. If ctx ends (or a
// segment fails) it writes the rows measured so far, of the scenario it
// was measuring the rounds it completed, and returns the error.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // before the cgroup check makes one
	}
	cfg, heavy := cfg.withRates(MeasureHeavy)
	rep := &Report{Config: cfg.reportConfig()}
	rep.Config.HeavyMs = heavy.Seconds() * 1e3
	// Every replica runs in a cgroup of its own where cgroups can be made,
	// as in a container: the quota scenario's with their CPU limits, the
	// batch scenario's without one, so that the kernel shares the CPU
	// between the replicas by their cgroups' equal weights. Without that,
	// the batch job's SCHED_IDLE thread would share CPU time equally with
	// the other replicas' calls, which ospriority runs on SCHED_IDLE
	// threads too: replicas on different machines do not slow each other.
	quotas, err := bench.OpenCPUQuotas(min(cfg.WeakCPU, cfg.CPU))
	if err == nil {
		rep.Cgroup = quotas.String()
	} else {
		for _, s := range cfg.Scenarios {
			if needsCgroups(s) {
				rep.Skipped = append(rep.Skipped, Skipped{s, err.Error()})
			}
		}
		if slices.Contains(cfg.Scenarios, ScenarioBatch) {
			rep.Notes = append(rep.Notes, "batch: the replicas run without cgroups of their own, so its batch job takes CPU time from the other replicas' calls: "+err.Error())
		}
	}
	if len(rep.Skipped) == len(cfg.Scenarios) {
		var reasons []string
		for _, s := range rep.Skipped {
			reasons = append(reasons, s.Scenario+": "+s.Reason)
		}
		return fmt.Errorf("fleet: %w: %s", ErrNothingToRun, strings.Join(reasons, "; "))
	}
	proc, _ := sysstat.NewReader("") // nil where /proc cannot be read: no CPU figures

	seed := cfg.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	rep.Config.Seed = seed
	var runErr error
	done := 0
	for si, scenario := range cfg.Scenarios {
		if needsCgroups(scenario) && quotas == nil {
			continue
		}
		rows := newRows(len(cfg.Policies))
	rounds:
		for round := range cfg.Rounds {
			for _, pi := range roundOrder(len(cfg.Policies), round) {
				policy := cfg.Policies[pi]
				done++
				cfg.Progress.Set("fleet: %s round %d of %d, %s (segment %d of %d)", scenario, round+1, cfg.Rounds, policy, done, cfg.segments(len(rep.Skipped)))
				// The policies of a round share their arrival times, so
				// that they differ by the balancer and the machine only.
				spec := segmentSpec{scenario: scenario, policy: policy, seed: seed + uint64(si)<<32 + uint64(round)}
				seg, err := runSegment(ctx, cfg, quotas, proc, spec)
				if err != nil {
					runErr = fmt.Errorf("fleet: %s under %s, round %d: %w", scenario, policy, round+1, err)
					if ctx.Err() != nil {
						runErr = ctx.Err()
					}
					break rounds
				}
				rows.add(pi, seg)
			}
			rows.endRound()
		}
		for pi, policy := range cfg.Policies {
			if r := rows.result(pi, scenario, policy, cfg.rate(scenario)); r != nil {
				rep.Results = append(rep.Results, *r)
			}
		}
		if runErr != nil {
			break
		}
	}
	cfg.Progress.Done()
	rep.Targets = targets(rep.Results)
	if runErr != nil && len(rep.Results) == 0 {
		return runErr
	}
	if err := writeOutputs(cfg, rep); err != nil {
		return err
	}
	return runErr
}

// segments is how many segments a run measures with skipped scenarios
// left out.
func (c Config) segments(skipped int) int {
	return (len(c.Scenarios) - skipped) * len(c.Policies) * c.Rounds
}

// reportConfig is the Report's copy of cfg.
func (c Config) reportConfig() ReportConfig {
	rc := ReportConfig{
		Replicas: c.Replicas, QuotaRate: c.QuotaRate, BatchRate: c.BatchRate, NeighborRate: c.NeighborRate, WeakCPU: c.WeakCPU, CPU: c.CPU,
		DurationS: c.Duration.Seconds(), WarmupS: c.Warmup.Seconds(), TimeoutS: c.Timeout.Seconds(),
		Rounds: c.Rounds, SegmentS: c.segment().Seconds(), Arrivals: c.Arrivals,
		BatchGOMAXPROCS: batchGOMAXPROCS, ServiceConfigs: map[string]string{},
		NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Started: time.Now().UTC().Truncate(time.Second),
	}
	for i, m := range methods {
		n := 0
		for _, k := range mix {
			if k == i {
				n++
			}
		}
		rc.Mix = append(rc.Mix, MixItem{Method: m.name, Share: float64(n) / float64(len(mix)), Passes: m.passes})
	}
	for _, p := range c.Policies {
		rc.ServiceConfigs[p] = serviceConfig(p)
	}
	return rc
}

// segmentSpec is one policy's segment of a round.
type segmentSpec struct {
	scenario, policy string
	seed             uint64 // of its Poisson arrivals
}

// segment is what one segment measured.
type segment struct {
	procs []*replicaProc // stopped: their hellos and specs
	rec   *recording
	w     window
}

// runSegment measures one scenario under one policy for one segment, on
// replicas it starts and stops.
func runSegment(ctx context.Context, cfg Config, quotas *bench.CPUQuotas, proc *sysstat.Reader, spec segmentSpec) (seg segment, err error) {
	specs := cfg.replicas(spec.scenario, spec.policy)
	procs := make([]*replicaProc, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		wg.Go(func() { procs[i], errs[i] = startReplica(ctx, cfg.Program, quotas, spec) })
	}
	wg.Wait()
	started := slices.DeleteFunc(slices.Clone(procs), func(p *replicaProc) bool { return p == nil })
	defer func() { err = errors.Join(err, stopAll(started)) }() // a replica that failed says why as it exits
	if err := errors.Join(errs...); err != nil {
		return segment{}, err
	}

	addrs := make([]string, len(procs))
	for i, p := range procs {
		addrs[i] = p.hello.Addr
	}
	var snaps [2]snapshot
	var snapping sync.WaitGroup
	duration := cfg.segment()
	rec, err := drive(ctx, driveSpec{
		addrs: addrs, policy: spec.policy, rate: cfg.rate(spec.scenario), arrivals: cfg.Arrivals, seed: spec.seed,
		warmup: cfg.Warmup, duration: duration, timeout: cfg.Timeout,
		window: func(start bool) {
			// Off the pacer's goroutine, which must not be late.
			i := 1
			if start {
				i = 0
			}
			snapping.Go(func() { snaps[i] = takeSnapshot(ctx, proc, procs) })
		},
	})
	snapping.Wait()
	if err != nil {
		return segment{}, err
	}
	w, err := snaps[1].since(snaps[0], duration)
	if err != nil {
		return segment{}, err
	}
	return segment{procs: procs, rec: rec, w: w}, nil
}

// snapshot is what was read at one end of a row's window.
type snapshot struct {
	taken     bool
	system    *sysstat.System    // nil if unread
	client    *sysstat.Process   // this process; nil if unread
	procs     []*sysstat.Process // nil entries if unread
	replica   []replicaStats
	neighbors []*hogproc.Count // nil entries without a neighbour
	cgroups   []*bench.CPUStat // nil entries without a cgroup, or unread
	err       error            // a replica did not answer
}

// takeSnapshot reads the machine's and the replicas' CPU time and the
// replicas' counters.
func takeSnapshot(ctx context.Context, proc *sysstat.Reader, procs []*replicaProc) snapshot {
	s := snapshot{taken: true, procs: make([]*sysstat.Process, len(procs)), replica: make([]replicaStats, len(procs)),
		neighbors: make([]*hogproc.Count, len(procs)), cgroups: make([]*bench.CPUStat, len(procs))}
	for i, p := range procs {
		if p.quota == nil {
			continue
		}
		if st, err := p.quota.ReadStat(); err == nil {
			s.cgroups[i] = &st
		}
	}
	if proc != nil {
		if sys, err := proc.Sample(); err == nil {
			s.system = &sys
		}
		if self, err := proc.Self(); err == nil {
			s.client = &self
		}
		for i, p := range procs {
			if ps, err := proc.Process(p.hello.PID); err == nil {
				s.procs[i] = &ps
			}
		}
	}
	for i, p := range procs {
		st, err := p.stats(ctx)
		if err != nil {
			s.err = err
			return s
		}
		s.replica[i] = st
		if p.neighbor != nil {
			c, err := p.neighbor.Count(ctx)
			if err != nil {
				s.err = err
				return s
			}
			s.neighbors[i] = &c
		}
	}
	return s
}

// since returns the window from earlier to s; duration is its length as
// planned, used where a snapshot is missing.
func (s snapshot) since(earlier snapshot, duration time.Duration) (window, error) {
	if err := errors.Join(earlier.err, s.err); err != nil {
		return window{}, err
	}
	if !earlier.taken || !s.taken {
		return window{}, errors.New("the measured window never started or ended (a rate too low for the duration?)")
	}
	w := window{seconds: duration.Seconds(), machineBusy: math.NaN(), clientCPU: math.NaN()}
	if s.system != nil && earlier.system != nil {
		w.machineBusy = s.system.Since(*earlier.system).Busy
	}
	if s.client != nil && earlier.client != nil {
		w.clientCPU = s.client.Since(*earlier.client).CPUPercent() / 100
	}
	for i := range s.replica {
		used := math.NaN()
		if s.procs[i] != nil && earlier.procs[i] != nil {
			used = s.procs[i].Since(*earlier.procs[i]).CPUPercent() / 100
		}
		w.cpuUsed = append(w.cpuUsed, used)
		w.batchPasses = append(w.batchPasses, s.replica[i].BatchPasses-earlier.replica[i].BatchPasses)
		var neighbor float64
		if s.neighbors[i] != nil && earlier.neighbors[i] != nil {
			neighbor = s.neighbors[i].PassesPerSecondSince(*earlier.neighbors[i])
		}
		w.neighborPasses = append(w.neighborPasses, neighbor)
		var throttled *bench.CgroupCPUStat
		if s.cgroups[i] != nil && earlier.cgroups[i] != nil {
			t := s.cgroups[i].Since(*earlier.cgroups[i])
			throttled = &t
		}
		w.throttled = append(w.throttled, throttled)
	}
	return w, nil
}
