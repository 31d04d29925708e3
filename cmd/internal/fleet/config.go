package fleet

import (
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// The scenarios, as -scenarios and the JSON name them.
const (
	// ScenarioQuota runs one replica (the first) under a smaller cgroup CPU
	// quota than the others.
	ScenarioQuota = "quota"
	// ScenarioBatch runs equal replicas, the first of which also runs a
	// batch job at ClassIdle through its own scheduler.
	ScenarioBatch = "batch"
	// ScenarioNeighbor runs equal replicas under equal cgroup CPU quotas,
	// the first of which shares its cgroup with a neighbour: a CPU-bound
	// process at normal priority (`cpusched neighbor`), one thread per CPU
	// of the quota.
	ScenarioNeighbor = "neighbor"
)

// The client's balancing policies, as -policies and the JSON name them.
const (
	// PolicyRoundRobin is grpc-go's round_robin.
	PolicyRoundRobin = "round_robin"
	// PolicyWRR is grpc-go's weighted_round_robin fed by cpusched's
	// per-call load reports (grpcsched.ServerMetricsProvider).
	PolicyWRR = "weighted_round_robin"
	// PolicyWRRCPU is the same balancer fed by cpu_utilization and qps
	// alone: the replicas leave application_utilization unset, which is
	// what a replica without cpusched could report.
	PolicyWRRCPU = "weighted_round_robin_cpu"
)

// The arrival processes of the load, as -arrivals and the JSON name them.
const (
	// ArrivalsFixed makes the calls fall due at a fixed interval, 1/rate
	// apart.
	ArrivalsFixed = "fixed"
	// ArrivalsPoisson makes them fall due at random times, a Poisson
	// process at the rate: exponential gaps, as from many independent
	// clients.
	ArrivalsPoisson = "poisson"
)

// Arrivals returns every arrival process.
func Arrivals() []string { return []string{ArrivalsFixed, ArrivalsPoisson} }

// Scenarios returns every scenario, in the order Run measures them.
func Scenarios() []string { return []string{ScenarioQuota, ScenarioBatch, ScenarioNeighbor} }

// needsCgroups reports whether scenario cannot run without cgroups: its
// quotas, and the neighbour, which shares its replica's.
func needsCgroups(scenario string) bool { return scenario != ScenarioBatch }

// Policies returns every policy, in the order Run measures them.
func Policies() []string { return []string{PolicyRoundRobin, PolicyWRR, PolicyWRRCPU} }

// Defaults and limits of Config, as the flags quote them. Why the rates
// and quotas are what they are: docs/grpc.md#what-it-runs.
const (
	DefaultReplicas = 3
	MinReplicas     = 2
	MaxReplicas     = 8

	// DefaultQuotaRate overloads the weak replica under round robin (its
	// third of the calls wants more CPU than its quota) while the fleet as
	// a whole has CPU to spare, where a heavy call takes ReferenceHeavy;
	// a rate of 0 scales it to the machine (calibrate.go).
	DefaultQuotaRate = 450
	// DefaultBatchRate is just below what the batch scenario's three
	// replicas can serve on the project's 2-core machine beside the client
	// and the batch job, where a heavy call takes ReferenceHeavy: there
	// queues build on whichever replica is slowest, which round robin
	// cannot see and a weighted balancer can. Far below it nothing waits
	// and every balancer reads the same; past it every replica backs up.
	DefaultBatchRate = 510
	// DefaultNeighborRate is what the two replicas without the neighbour
	// can serve on their own beside it and the client, where a heavy call
	// takes ReferenceHeavy: the neighbour's cgroup takes its whole quota
	// (0.8 CPU), which leaves them about 1 CPU, and 450/s, the quota
	// scenario's rate, filled it (their quotas ran out in a fifth of the
	// periods, and every policy's p99 was 1.7 s or more).
	DefaultNeighborRate = 300
	MinRate             = 1
	MaxRate             = 5000

	// DefaultWeakCPU and DefaultCPU are the quota scenario's CPU limits:
	// 0.3 against 0.8 CPUs, which fit beside the client on 2 cores.
	// DefaultCPU is the neighbor scenario's limit of every replica too:
	// with the neighbour's cgroup full, the fleet uses about as much.
	DefaultWeakCPU = 0.3
	DefaultCPU     = 0.8

	// DefaultDuration is a row's measured time, split into DefaultRounds
	// segments; each segment runs on fresh replicas after DefaultWarmup of
	// load that is not measured, longer than the balancer's blackout
	// period so that the weights are in use when the measuring starts.
	DefaultDuration = 15 * time.Second
	DefaultWarmup   = 1500 * time.Millisecond
	// DefaultRounds interleaves the policies' segments so that the slow
	// drift of a shared machine's load falls on every policy alike, while
	// each segment stays long against the balancer's weight updates.
	DefaultRounds = 5
	// QuickDuration, QuickWarmup and QuickRounds keep a -quick run of
	// every scenario and policy under 90 s.
	QuickDuration = 3 * time.Second
	QuickWarmup   = DefaultWarmup
	QuickRounds   = 2
	// MinDuration is the shortest segment: Duration over Rounds.
	MinDuration = 500 * time.Millisecond
	MaxDuration = 10 * time.Minute
	MaxWarmup   = time.Minute
	MinRounds   = 1
	MaxRounds   = 20

	// DefaultArrivals is the arrival process of the load: the fixed
	// interval the rates were chosen for, and the one that adds no noise
	// of its own to the comparison.
	DefaultArrivals = ArrivalsFixed

	// DefaultTimeout is each call's deadline from the time it was due: a
	// call that has not been answered by then is an error.
	DefaultTimeout = 2 * time.Second
	MinTimeout     = 10 * time.Millisecond
	MaxTimeout     = time.Minute
)

// Config describes one run. Start from DefaultConfig.
type Config struct {
	// Program is the cpusched binary that runs the replicas, as
	// `Program fleet-replica FLAGS` (ReplicaCommand); the CLI passes
	// os.Executable().
	Program string
	// Replicas is how many replicas each row runs (MinReplicas..MaxReplicas).
	Replicas int
	// Scenarios and Policies are what to measure, in order: every
	// combination is a row.
	Scenarios, Policies []string
	// QuotaRate, BatchRate and NeighborRate are the open-loop rates of
	// the scenarios, calls/s (MinRate..MaxRate), or 0: the default scaled
	// to this machine's heavy call (MeasureHeavy), which Run measures
	// first.
	QuotaRate, BatchRate, NeighborRate float64
	// WeakCPU and CPU are the quota scenario's cgroup CPU limits: the
	// first replica's and the others' (bench.MinCPUQuota..NumCPU); CPU is
	// every neighbor replica's too.
	WeakCPU, CPU float64
	// Duration is each row's measured time (MinDuration..MaxDuration),
	// split into Rounds segments (MinRounds..MaxRounds, each at least
	// MinDuration): round after round, every policy of a scenario runs one
	// segment on fresh replicas, after Warmup (0..MaxWarmup) of load that
	// is not measured.
	Duration, Warmup time.Duration
	Rounds           int
	// Arrivals is the load's arrival process: ArrivalsFixed or
	// ArrivalsPoisson.
	Arrivals string
	// Seed seeds the Poisson arrivals; 0 takes one from the clock. The
	// report gives the one used.
	Seed uint64
	// Timeout is each call's deadline from its due time
	// (MinTimeout..MaxTimeout).
	Timeout time.Duration
	// JSONPath, if set, is a file for the results as JSON; "-" writes the
	// JSON to Stdout instead of the tables.
	JSONPath string
	// OutDir, if set, gets fleet.json, fleet.png (the p99s) and
	// fleet-share.png (the replicas' shares).
	OutDir string
	// Stdout gets the tables (or the JSON); nil discards them.
	Stdout io.Writer
	// Progress shows what is running; nil shows nothing.
	Progress *report.Progress
}

// DefaultConfig returns the defaults, with program as Config.Program.
func DefaultConfig(program string) Config {
	return Config{
		Program:   program,
		Replicas:  DefaultReplicas,
		Scenarios: Scenarios(),
		Policies:  Policies(),
		WeakCPU:   DefaultWeakCPU,
		CPU:       DefaultCPU,
		Duration:  DefaultDuration,
		Warmup:    DefaultWarmup,
		Rounds:    DefaultRounds,
		Arrivals:  DefaultArrivals,
		Timeout:   DefaultTimeout,
	}
}

// Validate checks every field; its error names the field, its flag and
// the valid range.
func (c Config) Validate() error {
	if c.Program == "" {
		return errors.New("fleet: Program is empty: the cpusched binary that runs the replicas")
	}
	if err := checkNames("Scenarios (-scenarios)", "scenario", c.Scenarios, Scenarios()); err != nil {
		return err
	}
	if err := checkNames("Policies (-policies)", "policy", c.Policies, Policies()); err != nil {
		return err
	}
	numCPU := float64(runtime.NumCPU())
	switch {
	case c.Replicas < MinReplicas || c.Replicas > MaxReplicas:
		return fmt.Errorf("fleet: Replicas (-replicas) must be in %d..%d, got %d", MinReplicas, MaxReplicas, c.Replicas)
	case c.QuotaRate != 0 && !inRange(c.QuotaRate, MinRate, MaxRate):
		return fmt.Errorf("fleet: QuotaRate (-quota-rate) must be 0 (scaled to this machine) or in %d..%d calls/s, got %v", MinRate, MaxRate, c.QuotaRate)
	case c.BatchRate != 0 && !inRange(c.BatchRate, MinRate, MaxRate):
		return fmt.Errorf("fleet: BatchRate (-batch-rate) must be 0 (scaled to this machine) or in %d..%d calls/s, got %v", MinRate, MaxRate, c.BatchRate)
	case c.NeighborRate != 0 && !inRange(c.NeighborRate, MinRate, MaxRate):
		return fmt.Errorf("fleet: NeighborRate (-neighbor-rate) must be 0 (scaled to this machine) or in %d..%d calls/s, got %v", MinRate, MaxRate, c.NeighborRate)
	case !inRange(c.WeakCPU, bench.MinCPUQuota, numCPU):
		return fmt.Errorf("fleet: WeakCPU (-weak-cpu) must be in %g..%g CPUs, got %v", bench.MinCPUQuota, numCPU, c.WeakCPU)
	case !inRange(c.CPU, bench.MinCPUQuota, numCPU):
		return fmt.Errorf("fleet: CPU (-cpu) must be in %g..%g CPUs, got %v", bench.MinCPUQuota, numCPU, c.CPU)
	case c.Duration < MinDuration || c.Duration > MaxDuration:
		return fmt.Errorf("fleet: Duration (-duration) must be in %v..%v, got %v", MinDuration, MaxDuration, c.Duration)
	case c.Rounds < MinRounds || c.Rounds > MaxRounds:
		return fmt.Errorf("fleet: Rounds (-rounds) must be in %d..%d, got %d", MinRounds, MaxRounds, c.Rounds)
	case c.segment() < MinDuration:
		return fmt.Errorf("fleet: Duration (-duration) %v over Rounds (-rounds) %d is a segment of %v: each must be at least %v", c.Duration, c.Rounds, c.segment(), MinDuration)
	case !slices.Contains(Arrivals(), c.Arrivals):
		return fmt.Errorf("fleet: Arrivals (-arrivals) must be one of %s, got %q", strings.Join(Arrivals(), ", "), c.Arrivals)
	case c.Warmup < 0 || c.Warmup > MaxWarmup:
		return fmt.Errorf("fleet: Warmup (-warmup) must be in 0..%v, got %v", MaxWarmup, c.Warmup)
	case c.Timeout < MinTimeout || c.Timeout > MaxTimeout:
		return fmt.Errorf("fleet: Timeout (-timeout) must be in %v..%v, got %v", MinTimeout, MaxTimeout, c.Timeout)
	}
	for _, s := range c.Scenarios {
		if r := c.rate(s); r != 0 && r*c.segment().Seconds() < 1 {
			return fmt.Errorf("fleet: the %s scenario's rate %v calls/s over a segment of %v (Duration (-duration) over Rounds (-rounds)) makes no call to measure: give at least one", s, r, c.segment())
		}
	}
	return nil
}

// segment is the measured time of one policy in one round.
func (c Config) segment() time.Duration {
	if c.Rounds < 1 {
		return c.Duration
	}
	return c.Duration / time.Duration(c.Rounds)
}

// inRange reports whether lo <= v <= hi (false for NaN).
func inRange(v, lo, hi float64) bool { return v >= lo && v <= hi && !math.IsNaN(v) }

// checkNames checks that names is a non-empty list of distinct items of
// valid.
func checkNames(field, what string, names, valid []string) error {
	if len(names) == 0 {
		return fmt.Errorf("fleet: %s: no %s given (valid: %s)", field, what, strings.Join(valid, ", "))
	}
	for i, n := range names {
		if !slices.Contains(valid, n) {
			return fmt.Errorf("fleet: %s: unknown %s %q (valid: %s)", field, what, n, strings.Join(valid, ", "))
		}
		if slices.Contains(names[:i], n) {
			return fmt.Errorf("fleet: %s: %s %q given twice", field, what, n)
		}
	}
	return nil
}

// rate returns the scenario's open-loop rate.
func (c Config) rate(scenario string) float64 {
	switch scenario {
	case ScenarioQuota:
		return c.QuotaRate
	case ScenarioNeighbor:
		return c.NeighborRate
	}
	return c.BatchRate
}

// replicaSpec is what one replica of a row is.
type replicaSpec struct {
	// cpuLimit is its cgroup CPU quota; 0 for none.
	cpuLimit float64
	// batch runs the background batch job at ClassIdle.
	batch bool
	// neighbor runs the neighbour in the replica's cgroup.
	neighbor bool
	// gomaxprocs, if not 0, is its GOMAXPROCS variable.
	gomaxprocs int
	// reports is ReportCpusched or ReportCPU.
	reports string
}

// batchGOMAXPROCS is the GOMAXPROCS of the batch scenario's replicas: one
// CPU each, as a one-CPU machine's, with no quota on their cgroups. A
// quota would not do: the batch job would spend it, and a spent quota
// stops every thread of the cgroup, the calls' too, however low the job's
// priority (docs/measurements/bench-quota.md).
const batchGOMAXPROCS = 1

// replicas returns the specs of a row's replicas: the first is the odd one
// (the weak one in quota, the one with the batch job in batch, the one
// with the neighbour in neighbor).
func (c Config) replicas(scenario, policy string) []replicaSpec {
	reports := ReportCpusched
	if policy == PolicyWRRCPU {
		reports = ReportCPU
	}
	specs := make([]replicaSpec, c.Replicas)
	for i := range specs {
		s := replicaSpec{reports: reports}
		switch scenario {
		case ScenarioQuota:
			s.cpuLimit = c.CPU
			if i == 0 {
				s.cpuLimit = c.WeakCPU
			}
		case ScenarioBatch:
			s.gomaxprocs = batchGOMAXPROCS
			s.batch = i == 0
		case ScenarioNeighbor:
			s.cpuLimit = c.CPU
			s.neighbor = i == 0
		}
		specs[i] = s
	}
	return specs
}
