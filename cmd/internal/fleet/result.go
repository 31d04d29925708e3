package fleet

import (
	"fmt"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Report is a run's results, as the JSON file has them.
type Report struct {
	Config ReportConfig `json:"config"`
	// Cgroup is the cgroup mount the replicas' cgroups were made on; ""
	// where none could be made.
	Cgroup string `json:"cgroup,omitempty"`
	// Notes say how the run differs from what was asked for.
	Notes []string `json:"notes,omitempty"`
	// Skipped lists the scenarios that could not run here, and why.
	Skipped []Skipped `json:"skipped,omitempty"`
	Results []Result  `json:"results"`
	// Targets are the balancing targets docs/grpc.md states, checked on
	// the results.
	Targets []Target `json:"targets"`
}

// ReportConfig is what the run was asked to do.
type ReportConfig struct {
	Replicas     int     `json:"replicas"`
	QuotaRate    float64 `json:"quota_rate"`
	BatchRate    float64 `json:"batch_rate"`
	NeighborRate float64 `json:"neighbor_rate"`
	// HeavyMs is the heavy call's work measured here (MeasureHeavy) where
	// a rate was scaled to it, else 0.
	HeavyMs   float64 `json:"heavy_ms"`
	WeakCPU   float64 `json:"weak_cpu"`
	CPU       float64 `json:"cpu"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	TimeoutS  float64 `json:"timeout_s"`
	// Rounds is how many segments of SegmentS each row's DurationS is
	// measured in, each after WarmupS on fresh replicas.
	Rounds   int     `json:"rounds"`
	SegmentS float64 `json:"segment_s"`
	// Arrivals is the arrival process; Seed seeds its Poisson times.
	Arrivals string    `json:"arrivals"`
	Seed     uint64    `json:"seed"`
	Mix      []MixItem `json:"mix"`
	// BatchGOMAXPROCS is the GOMAXPROCS of the batch scenario's replicas.
	BatchGOMAXPROCS int `json:"batch_gomaxprocs"`
	// ServiceConfigs are the client's service configs, by policy.
	ServiceConfigs map[string]string `json:"service_configs"`
	NumCPU         int               `json:"num_cpu"`
	GoVersion      string            `json:"go_version"`
	Started        time.Time         `json:"started"`
}

// MixItem is one method's part of the calls.
type MixItem struct {
	Method string  `json:"method"`
	Share  float64 `json:"share"`
	Passes int     `json:"crc_passes"`
}

// Skipped is a scenario that did not run.
type Skipped struct {
	Scenario string `json:"scenario"`
	Reason   string `json:"reason"`
}

// Result is one row: a scenario under a policy.
type Result struct {
	Scenario string  `json:"scenario"`
	Policy   string  `json:"policy"`
	Rate     float64 `json:"rate"`
	// Rounds is how many segments the row merges: Config's Rounds, or
	// fewer in a run that was interrupted.
	Rounds int `json:"rounds"`
	// RoundP99Ms is each round's p99 on its own, in the order the rounds
	// ran (null for a round without calls): how far one segment decides.
	RoundP99Ms []*float64 `json:"round_p99_ms"`
	// Calls, the latencies and Errors cover every call due in the
	// measured windows, of all methods; a failed call's latency runs to
	// its failure.
	Calls  int64   `json:"calls"`
	ReqS   float64 `json:"req_s"` // the calls answered without error, per second
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
	// ErrorsByCode counts the errors by gRPC status code.
	ErrorsByCode map[string]int64 `json:"errors_by_code,omitempty"`
	// Unpicked counts the calls that failed before the balancer picked a
	// replica for them (they count in no replica's share).
	Unpicked int64           `json:"unpicked"`
	Methods  []MethodResult  `json:"methods"`
	Replicas []ReplicaResult `json:"replicas"`
	// MachineBusyPct is the whole machine's CPU use over the window, in
	// percent of all its CPUs: what the client, the replicas and anything
	// else running used. Null where /proc cannot be read.
	MachineBusyPct *float64 `json:"machine_cpu_busy_pct"`
	// ClientCPU is the client's CPU use over the window (this process's:
	// the load and the balancer), in CPUs; null where /proc cannot be read.
	ClientCPU *float64 `json:"client_cpu"`
}

// MethodResult is one method's calls of a row.
type MethodResult struct {
	Method string  `json:"method"`
	Calls  int64   `json:"calls"`
	ReqS   float64 `json:"req_s"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
}

// ReplicaResult is one replica of a row.
type ReplicaResult struct {
	ID int `json:"id"`
	// CPULimit is the cgroup CPU limit the replica's scheduler read, in
	// CPUs; 0 for none.
	CPULimit   float64 `json:"cpu_limit"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	Workers    int     `json:"workers"`
	Isolation  string  `json:"isolation"`
	Batch      bool    `json:"batch"`
	// Neighbor is whether a neighbour shared its cgroup.
	Neighbor bool `json:"neighbor"`
	// Calls and Errors count the measured calls the balancer sent it;
	// Share is Calls over the row's calls that reached a replica, 0..1.
	Calls  int64   `json:"calls"`
	Errors int64   `json:"errors"`
	Share  float64 `json:"share"`
	// P50Ms and P99Ms are its calls' latencies (null without calls).
	P50Ms *float64 `json:"p50_ms"`
	P99Ms *float64 `json:"p99_ms"`
	// ThrottledPct is the share of the CFS bandwidth periods in which its
	// cgroup ran out of quota, in percent, and ThrottledMs the time it was
	// stopped for that; null without a quota.
	ThrottledPct *float64 `json:"throttled_pct"`
	ThrottledMs  *float64 `json:"throttled_ms"`
	// CPUUsed is the replica's CPU time over the window, in CPUs; null
	// where /proc cannot be read.
	CPUUsed *float64 `json:"cpu_used"`
	// ReportedApp and ReportedCPU are the means of the
	// application_utilization and cpu_utilization of the load reports its
	// calls carried (0 where a report left one out); null without reports.
	ReportedApp *float64 `json:"reported_app_util"`
	ReportedCPU *float64 `json:"reported_cpu_util"`
	// HeavyRunMs and HeavyQueueWaitMs are the means of the heavy calls'
	// request costs in their reports: the time each held its slot
	// (cpusched_run_ms; against its CPU time, what the CPU contention cost)
	// and its wait for one (cpusched_queue_wait_ms); null without reports.
	HeavyRunMs       *float64 `json:"heavy_run_ms"`
	HeavyQueueWaitMs *float64 `json:"heavy_queue_wait_ms"`
	// BatchPassesPerS is the batch job's CRC32 passes per second over the
	// window (0 without one).
	BatchPassesPerS float64 `json:"batch_passes_per_s"`
	// NeighborPassesPerS is its neighbour's CRC32 passes per second over
	// the window (0 without one).
	NeighborPassesPerS float64 `json:"neighbor_passes_per_s"`
}

// window is what was measured beside the calls over a row's window.
type window struct {
	seconds float64
	// machineBusy is the machine's CPU use in percent, clientCPU this
	// process's in CPUs; NaN if unknown.
	machineBusy, clientCPU float64
	// cpuUsed is each replica's CPU use in CPUs; NaN if unknown.
	cpuUsed []float64
	// batchPasses is each replica's batch passes in the window, and
	// neighborPasses its neighbour's passes per second (0 without one).
	batchPasses    []int64
	neighborPasses []float64
	// throttled is each replica's cgroup accounting; nil without a quota.
	throttled []*bench.CgroupCPUStat
}

// newResult computes a row's result from its calls and its window.
func newResult(scenario, policy string, rate float64, procs []*replicaProc, rec *recording, w window) Result {
	secs := w.seconds
	res := Result{
		Scenario: scenario, Policy: policy, Rate: rate,
		Unpicked:     rec.unpicked,
		ErrorsByCode: rec.errCodes,
	}
	var failed int64
	for i, m := range methods {
		mr := rec.methods[i]
		res.Calls += mr.calls
		failed += mr.errors
		p := percentiles(mr.hist)
		res.Methods = append(res.Methods, MethodResult{
			Method: m.name, Calls: mr.calls, ReqS: perSecond(mr.calls-mr.errors, secs),
			P50Ms: p[0], P99Ms: p[1], P999Ms: p[2], MaxMs: p[3], Errors: mr.errors,
		})
	}
	p := percentiles(rec.all)
	res.P50Ms, res.P99Ms, res.P999Ms, res.MaxMs = p[0], p[1], p[2], p[3]
	res.Errors = failed
	res.ReqS = perSecond(res.Calls-failed, secs)
	res.MachineBusyPct, res.ClientCPU = optional(w.machineBusy), optional(w.clientCPU)

	picked := res.Calls - rec.unpicked
	for i, pr := range procs {
		rr := rec.replicas[i]
		r := ReplicaResult{
			ID: i, CPULimit: pr.hello.CPULimit, GOMAXPROCS: pr.hello.GOMAXPROCS,
			Workers: pr.hello.Workers, Isolation: pr.hello.Isolation, Batch: pr.spec.batch, Neighbor: pr.spec.neighbor,
			Calls: rr.calls, Errors: rr.errors,
		}
		if picked > 0 {
			r.Share = float64(rr.calls) / float64(picked)
		}
		p := percentiles(rr.hist)
		r.P50Ms, r.P99Ms = optional(p[0]), optional(p[1])
		if i < len(w.throttled) && w.throttled[i] != nil && pr.spec.cpuLimit > 0 {
			t := w.throttled[i]
			r.ThrottledMs = optional(t.ThrottledMs)
			if t.Periods > 0 {
				r.ThrottledPct = optional(100 * float64(t.Throttled) / float64(t.Periods))
			}
		}
		if i < len(w.cpuUsed) {
			r.CPUUsed = optional(w.cpuUsed[i])
		}
		if rr.reports > 0 {
			r.ReportedApp = optional(rr.app / float64(rr.reports))
			r.ReportedCPU = optional(rr.cpu / float64(rr.reports))
		}
		if n := float64(rr.heavyReports); n > 0 {
			r.HeavyRunMs, r.HeavyQueueWaitMs = optional(rr.heavyRun/n), optional(rr.heavyWait/n)
		}
		if i < len(w.batchPasses) {
			r.BatchPassesPerS = perSecond(w.batchPasses[i], secs)
		}
		if i < len(w.neighborPasses) {
			r.NeighborPassesPerS = w.neighborPasses[i]
		}
		res.Replicas = append(res.Replicas, r)
	}
	return res
}

// percentiles returns h's p50, p99, p99.9 and max in milliseconds; NaN
// for an empty h.
func percentiles(h *hdrhistogram.Histogram) [4]float64 {
	if h.TotalCount() == 0 {
		nan := math.NaN()
		return [4]float64{nan, nan, nan, nan}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return [4]float64{ms(h.ValueAtQuantile(50)), ms(h.ValueAtQuantile(99)), ms(h.ValueAtQuantile(99.9)), ms(h.Max())}
}

// perSecond is n over secs, 0 for no time.
func perSecond(n int64, secs float64) float64 {
	if secs <= 0 {
		return 0
	}
	return float64(n) / secs
}

// optional returns a pointer to v, or nil for NaN (JSON's null).
func optional(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// Target is one of the balancing targets docs/grpc.md states, checked on
// a run's rows. Each compares one statistic of the run, Value, with a
// Limit: a ratio of two rows measured side by side, or a count.
type Target struct {
	Scenario string `json:"scenario"`
	Target   string `json:"target"`
	Held     bool   `json:"held"`
	// Detail gives the numbers compared.
	Detail string `json:"detail"`
	// Value is the statistic: a p99 over another row's, a share over
	// another row's, a share's distance from another's over that share, or
	// a count of errors. Held is Value <= Limit, or < where Strict.
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	Strict bool    `json:"strict,omitempty"`
}

// check sets t.Held from its Value, Limit and Strict.
func (t Target) check() Target {
	t.Held = t.Value <= t.Limit
	if t.Strict {
		t.Held = t.Value < t.Limit
	}
	return t
}

// targets checks those targets on the rows that they compare; a
// target whose rows were not measured is left out.
func targets(results []Result) []Target {
	find := func(scenario, policy string) *Result {
		for i := range results {
			if results[i].Scenario == scenario && results[i].Policy == policy {
				return &results[i]
			}
		}
		return nil
	}
	var ts []Target
	p99Within := func(scenario string, a, b *Result, factor float64, strict bool) {
		if a == nil || b == nil {
			return
		}
		op := "<="
		if strict {
			op = "<"
		}
		what := fmt.Sprintf("%s p99 %s %gx %s's", a.Policy, op, factor, b.Policy)
		if factor == 1 {
			what = fmt.Sprintf("%s p99 %s %s's", a.Policy, op, b.Policy)
		}
		ratio := a.P99Ms / b.P99Ms
		ts = append(ts, Target{Scenario: scenario, Target: what, Value: ratio, Limit: factor, Strict: strict,
			Detail: fmt.Sprintf("%s ms, %.2fx %s's %s ms", report.Ms(a.P99Ms), ratio, b.Policy, report.Ms(b.P99Ms))}.check())
	}
	// shareLower compares the first replica's share under a and b.
	shareLower := func(scenario, which string, a, b *Result) {
		if a == nil || b == nil || len(a.Replicas) == 0 || len(b.Replicas) == 0 {
			return
		}
		x, y := a.Replicas[0].Share, b.Replicas[0].Share
		ts = append(ts, Target{Scenario: scenario, Target: which + "'s share lower under " + a.Policy + " than under " + b.Policy,
			Value: x / y, Limit: 1, Strict: true, Detail: fmt.Sprintf("%.1f%% against %.1f%%", 100*x, 100*y)}.check())
	}

	rr, wrr, cpu := find(ScenarioQuota, PolicyRoundRobin), find(ScenarioQuota, PolicyWRR), find(ScenarioQuota, PolicyWRRCPU)
	p99Within(ScenarioQuota, wrr, rr, 0.7, false)
	shareLower(ScenarioQuota, "the weak replica", wrr, rr)
	if wrr != nil {
		ts = append(ts, Target{Scenario: ScenarioQuota, Target: PolicyWRR + ": no errors", Value: float64(wrr.Errors),
			Detail: fmt.Sprintf("%d errors", wrr.Errors)}.check())
	}
	p99Within(ScenarioQuota, wrr, cpu, 1.2, false)

	// On equal replicas the reports' job is not to starve the one whose
	// spare CPU runs batch work; whether the weighted balancer then beats
	// round robin is a coin toss (docs/grpc.md#the-results).
	rr, wrr, cpu = find(ScenarioBatch, PolicyRoundRobin), find(ScenarioBatch, PolicyWRR), find(ScenarioBatch, PolicyWRRCPU)
	p99Within(ScenarioBatch, wrr, rr, 1.1, false)
	p99Within(ScenarioBatch, wrr, cpu, 1, true)
	if wrr != nil && rr != nil && len(wrr.Replicas) > 0 && len(rr.Replicas) > 0 {
		a, b := wrr.Replicas[0].Share, rr.Replicas[0].Share
		ts = append(ts, Target{Scenario: ScenarioBatch, Target: "the batch replica's share under " + PolicyWRR + " within 10% of its " + PolicyRoundRobin + " share",
			Value: math.Abs(a-b) / b, Limit: 0.1, Detail: fmt.Sprintf("%.1f%% against %.1f%% to %.1f%%", 100*a, 90*b, 110*b)}.check())
	}

	rr, wrr, cpu = find(ScenarioNeighbor, PolicyRoundRobin), find(ScenarioNeighbor, PolicyWRR), find(ScenarioNeighbor, PolicyWRRCPU)
	p99Within(ScenarioNeighbor, wrr, rr, 0.7, false)
	p99Within(ScenarioNeighbor, wrr, cpu, 1, true)
	shareLower(ScenarioNeighbor, "the neighbour's replica", wrr, rr)
	return ts
}
