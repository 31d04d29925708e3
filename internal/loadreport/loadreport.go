// Package loadreport computes the load a replica reports to its balancer
// and autoscaler: the values of grpcsched's ORCA reports, of httpsched's
// endpoint-load-metrics header and of promsched's utilization gauges, the
// same in all three because they come from one Meter per Scheduler.
//
// What a balancer does with a report decides what the values must be.
// grpc-go's weighted_round_robin (and Envoy's client_side_weighted_round_robin)
// weighs an endpoint by qps / (utilization + penalty x eps/qps), ignores a
// report whose utilization or qps is 0, and keeps the latest report; so the
// values are averaged over a window rather than read at the instant a call
// ends (at most call ends an instantaneous count is 0), qps is always set,
// and the utilization is never 0 while calls are served. The exception is
// an overload, which an average would take a window to show: where the
// slots were held through the last quarter of a second and more tasks
// hold or wait for one than there are slots, Application is at least
// their number over the slots (up to maxOverload), above 1 at once.
//
// The utilization is the latency-relevant demand, not the CPU's: tasks of
// ClassBatch and ClassIdle keep the CPU busy but a Normal call is served
// ahead of them (the small-task lane takes Batch's slot at its next
// Checkpoint, Idle runs only when nothing else waits), so a replica whose
// spare CPU runs a batch job is not busy for its callers. The demand is
// the slot time of the classes a Normal call waits behind (Realtime and
// Normal), scaled where all the classes' slot time exceeds the process's
// CPU time by the share of it that ran (a slot whose thread the kernel
// did not run, because other processes had the CPU or a cgroup quota was
// spent, is not work: the calls that waited meanwhile count as queued),
// over the slot time the scheduler has, and the utilization that the mean
// number of their tasks queued for a first slot implies (the M/M/1
// queue's with that many waiting); and since a CPU that is saturated by
// other work than the yielding classes (the RPC framework, the garbage
// collector, code outside the scheduler) or limited by a quota delays
// calls too, Application is the largest of those two and the CPU's
// saturation: the CPU net of the yielding classes over the budget, plus
// the share of a cgroup quota's periods in which it ran out (the CPU's
// share alone can read no more than 1 under a quota, however far past it
// the calls are). How each value is computed, exactly:
// docs/grpc.md#how-each-value-is-computed.
//
// Everything comes from Scheduler.Stats, sampled at most every step (Stats
// takes the scheduler's lock, so not once per call), from the process's
// CPU time and its cgroup's cpu.stat, and from what the adapters record of
// each call (Arrive, End). Nothing runs in the background: a Report call
// takes a sample when the last is a step old.
package loadreport

import (
	"math"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/cgroupcpu"
	"github.com/cpusched/cpusched/internal/schedmap"
)

const (
	// window is the span the values average over: as long as grpc-go's
	// default weight update period, so that each update sees a fresh
	// average and no single call end swings it.
	window = time.Second
	// step is the least time between two samples of Stats.
	step = 100 * time.Millisecond
	// ringSize is how many samples a Meter keeps: enough that one is at
	// least window older than the newest when they are step apart.
	ringSize = int(window/step) + 6
	// minApplication is Application's floor while calls are served: a
	// balancer ignores a 0, and a call that ended within the last step may
	// not be in the newest sample yet.
	minApplication = 0.001
	// budgetRefresh is how often the CPU budget is read again: a
	// container's CPU limit can change while it runs.
	budgetRefresh = 10 * time.Second

	// An overload is read at once, apart from the window's averages, which
	// take a window to see it: where Realtime and Normal tasks held at least
	// heldShare of the slots' time over the last fastWindow or a little more
	// (the span from the newest sample at least that old), and more of them
	// than there are slots hold or wait for one now, Application is at least
	// their number over the slots: above 1, by as much as the calls outrun
	// the replica (the averages cannot say that: the queue of tasks parked
	// at a Checkpoint is not in them, since ClassStats.QueueTime counts only
	// the waits for a first slot, and the utilization a queue implies is
	// below 1). The share is high enough that a replica's ordinary bursts,
	// whose slots are free between them, seldom pass it, and low enough that
	// a sample up to a step before the overload began leaves it passed by
	// half a second in. Once the overload ends the reading falls as the
	// window's averages do, over a window, and no slower: a balancer hears
	// from a replica only in the calls it sends it, so a reading held past
	// the queue's end kept a drained replica at a weight too low to be sent
	// the calls that would have reported it free
	// (docs/measurements/fleet.md#tried-and-dropped).
	fastWindow = 250 * time.Millisecond
	heldShare  = 0.8
	// maxOverload caps the overload's reading, in tasks per slot. Past
	// it a balancer learns nothing more, and a larger reading can starve
	// the replica after it drains: grpc-go's weighted_round_robin scales
	// the weights so that the largest is 65535 and never picks one that
	// rounds to 0, until the replica's last report expires (3 min by
	// default), as a replica sent no calls reports nothing new. At 10, a
	// replica beside others reading 0.05 keeps a weight of about 1/200
	// of theirs.
	maxOverload = 10
)

// The names the reports give cpusched's own values, in milliseconds: the
// named metric of the calls' queue wait p99 (ORCA's named_metrics, and in
// httpsched's header named_metrics.<name>), and grpcsched's request costs
// of each call.
const (
	QueueWaitP99Metric = "cpusched_queue_wait_p99_ms"
	RunCost            = "cpusched_run_ms"
	QueueWaitCost      = "cpusched_queue_wait_ms"
)

// Millis returns d in milliseconds, the unit of the names above.
func Millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Report is one load report. The values are averages over the last
// window (or since the Meter was made, if sooner).
type Report struct {
	// Application is ORCA's application_utilization: the largest of the
	// latency-relevant slot time (its share of the process's CPU time where
	// all the classes held their slots longer than that) over the slot
	// capacity, the utilization its queue implies, the CPU's saturation (net
	// of ClassBatch and ClassIdle, plus the share of the quota's periods in
	// which it ran out), and in an overload the latency-relevant tasks in
	// per slot, up to 10; at least minApplication while calls end.
	Application float64
	// CPU is ORCA's cpu_utilization: the process's CPU time over its CPU
	// budget; -1 where the process's CPU time cannot be read, or before
	// the first interval.
	CPU float64
	// QPS is the calls that came to the adapters of the scheduler per
	// second, whatever their outcome; EPS the calls shed per second.
	QPS, EPS float64
	// QueueWaitP99 is the 99th percentile of the calls' waits for CPU
	// (Task.Waited of the calls that ran, the wait of those that left while
	// queued), rounded up to a bound of the wait histogram; 0 without such
	// calls in the window.
	QueueWaitP99 time.Duration
}

// Outcome is how a call ended, for End.
type Outcome int

const (
	// Ran: the call's task started (its handler ran, whatever it returned).
	Ran Outcome = iota
	// Left: the call's context ended while its task was queued.
	Left
	// Shed: the adapter answered at once that it is overloaded (its limit,
	// or the scheduler's queue full or closed) without queueing the call.
	Shed
	// Refused: the call's task options were refused (by the adapter or the scheduler).
	Refused
)

// Meter is the load of one Scheduler. Its methods are safe for concurrent
// use.
type Meter struct {
	src source

	calls, shed atomic.Uint64
	waits       waitHistogram

	mu  sync.Mutex // held to take a sample
	cur atomic.Pointer[state]
}

// source is where a Meter reads the time, the scheduler's Stats and the
// process's CPU; tests give fakes.
type source struct {
	now    func() time.Duration                 // a monotonic clock
	stats  func() (cpusched.Stats, bool)        // false once the scheduler is gone
	cpu    func() (used time.Duration, ok bool) // the process's CPU time
	budget func() float64                       // the CPU budget, in CPUs
	// quota reads the cgroup quota's periods and those in which it ran
	// out; ok false without a quota.
	quota func() (periods, throttled int64, ok bool)
	// groupCPU reads the CPU time of every process in that cgroup; ok
	// false where it cannot be read (nil: the process's own, as alone).
	groupCPU func() (time.Duration, bool)
}

// sample is the cumulative counters at one time.
type sample struct {
	at        time.Duration
	workers   int
	lrRun     time.Duration // slot time of ClassRealtime and ClassNormal
	lrQueue   time.Duration // the time their tasks spent queued for a first slot (ClassStats.QueueTime)
	yieldRun  time.Duration // slot time of ClassBatch and ClassIdle
	lrLive    int           // their tasks holding or waiting for a slot now (liveLatencyRelevant)
	cpu       time.Duration
	cpuOK     bool
	periods   int64 // the cgroup quota's periods
	throttled int64 // those in which it ran out
	quotaOK   bool
	groupCPU  time.Duration // the CPU time of every process in that cgroup
	groupOK   bool
	calls     uint64
	shed      uint64
	waits     [numBuckets]uint64
}

// state is what a Report call reads: replaced whole at each sample.
type state struct {
	samples  []sample // oldest first
	base     sample   // the sample the report's interval starts at
	report   Report   // QPS and EPS are computed at each Report call
	budget   float64
	budgetAt time.Duration
}

// meters holds the Meter of each Scheduler.
var meters schedmap.Map[*Meter]

// For returns the Meter of s, made at the first call for s.
func For(s *cpusched.Scheduler) *Meter {
	return meters.For(s, func(key weak.Pointer[cpusched.Scheduler]) *Meter {
		start := time.Now()
		q := new(quotaStat)
		return newMeter(source{
			now: func() time.Duration { return time.Since(start) },
			stats: func() (cpusched.Stats, bool) {
				// The Meter holds s weakly: the map, which holds the
				// Meter, must not keep s alive.
				if s := key.Value(); s != nil {
					return s.Stats(), true
				}
				return cpusched.Stats{}, false
			},
			cpu:      processCPU,
			budget:   cpuBudget,
			quota:    q.read,
			groupCPU: q.groupCPU,
		})
	})
}

// newMeter returns a Meter reading src, with its first sample taken now.
func newMeter(src source) *Meter {
	m := &Meter{src: src}
	now := src.now()
	first, _ := m.take(now)
	m.cur.Store(&state{
		samples:  []sample{first},
		base:     first,
		report:   Report{CPU: -1},
		budget:   src.budget(),
		budgetAt: now,
	})
	return m
}

// Arrive counts a call that came to an adapter. It is counted as it comes,
// not as it ends, so that the report its own response carries counts it.
// It takes a sample first if the last is a step old, so that calls that
// come together and hold every slot for a while leave a sample from
// before them: without it, the first report after them, at the first
// call's end, would average their load with whatever quiet came before.
func (m *Meter) Arrive() {
	m.fresh(m.src.now())
	m.calls.Add(1)
}

// End records the end of a call that Arrive counted: its outcome, and for
// Ran and Left its wait for CPU (Task.Waited, or how long it was queued).
func (m *Meter) End(o Outcome, wait time.Duration) {
	switch o {
	case Ran:
		m.waits.record(wait)
	case Left:
		// The scheduler counts its time queued (ClassStats.QueueTime).
		m.waits.record(wait)
	case Shed:
		m.shed.Add(1)
	}
}

// Report returns the load now. It takes a sample of the scheduler's
// Stats first if the last is a step old and no other call is taking one.
func (m *Meter) Report() Report {
	now := m.src.now()
	st := m.fresh(now)
	r := st.report
	// The rates count the calls up to now, not to the newest sample, so
	// that the call being answered is in them.
	elapsed := max(now-st.base.at, step).Seconds()
	calls := m.calls.Load() - st.base.calls
	r.QPS = float64(calls) / elapsed
	r.EPS = float64(m.shed.Load()-st.base.shed) / elapsed
	if calls > 0 && r.Application < minApplication {
		r.Application = minApplication
	}
	return r
}

// fresh returns the state, having taken a sample at now first if the last
// is a step old and no other call is taking one.
func (m *Meter) fresh(now time.Duration) *state {
	st := m.cur.Load()
	if now-st.samples[len(st.samples)-1].at >= step && m.mu.TryLock() {
		st = m.sampleLocked(now)
		m.mu.Unlock()
	}
	return st
}

// sampleLocked takes a sample at now and computes the report over the
// window it ends, unless another call just did; m.mu is held.
func (m *Meter) sampleLocked(now time.Duration) *state {
	old := m.cur.Load()
	if now-old.samples[len(old.samples)-1].at < step {
		return old
	}
	cur, ok := m.take(now)
	if !ok {
		return old // the scheduler is gone: the last report stands
	}
	st := &state{budget: old.budget, budgetAt: old.budgetAt}
	if now-st.budgetAt >= budgetRefresh {
		st.budget, st.budgetAt = m.src.budget(), now
	}
	keep := old.samples[max(0, len(old.samples)+1-ringSize):]
	st.samples = append(append(make([]sample, 0, len(keep)+1), keep...), cur)
	st.base = windowStart(st.samples)
	st.report = compute(st.base, cur, st.budget)
	st.report.Application = max(st.report.Application, overloaded(newestBefore(st.samples, cur.at-fastWindow), cur))
	m.cur.Store(st)
	return st
}

// windowStart returns the sample that a report's interval starts at, of
// samples (oldest first, the newest last): the oldest at most window older
// than the newest, other than the newest; where there is none, the one
// before the newest. So the interval is a window long while samples come
// every step, and starts at the last sample before the calls while they
// come after a quiet stretch without samples: from an older one, a busy
// stretch's average would be spread over the quiet before it, and fall as
// it went on (an overload of 0.7s after a quiet second read 0.4).
func windowStart(samples []sample) sample {
	cur := samples[len(samples)-1]
	for _, s := range samples[:len(samples)-1] {
		if s.at >= cur.at-window {
			return s
		}
	}
	return samples[max(0, len(samples)-2)]
}

// newestBefore returns the newest of samples (oldest first) taken at or
// before at, or the oldest if none was.
func newestBefore(samples []sample, at time.Duration) sample {
	base := samples[0]
	for _, s := range samples {
		if s.at > at {
			break
		}
		base = s
	}
	return base
}

// take reads the counters at now; false once the scheduler is gone.
func (m *Meter) take(now time.Duration) (sample, bool) {
	st, ok := m.src.stats()
	if !ok {
		return sample{}, false
	}
	c := &st.Classes
	s := sample{
		at:       now,
		workers:  st.Workers,
		lrRun:    c[cpusched.ClassRealtime].RunTime + c[cpusched.ClassNormal].RunTime,
		lrQueue:  c[cpusched.ClassRealtime].QueueTime + c[cpusched.ClassNormal].QueueTime,
		yieldRun: c[cpusched.ClassBatch].RunTime + c[cpusched.ClassIdle].RunTime,
		lrLive:   liveLatencyRelevant(&st),
		calls:    m.calls.Load(),
		shed:     m.shed.Load(),
		waits:    m.waits.snapshot(),
	}
	s.cpu, s.cpuOK = m.src.cpu()
	if m.src.quota != nil {
		s.periods, s.throttled, s.quotaOK = m.src.quota()
	}
	if s.quotaOK && m.src.groupCPU != nil {
		s.groupCPU, s.groupOK = m.src.groupCPU()
	}
	return s, true
}

// compute returns the report over the interval from b to c (without QPS
// and EPS, which Report computes), for a CPU budget of budget CPUs.
func compute(b, c sample, budget float64) Report {
	r := Report{CPU: -1, QueueWaitP99: p99(&b.waits, &c.waits)}
	dt := (c.at - b.at).Seconds()
	if dt <= 0 || c.workers <= 0 {
		return r
	}
	slots := float64(c.workers) * dt
	run := max(0, (c.lrRun - b.lrRun).Seconds())
	queued := max(0, (c.lrQueue - b.lrQueue).Seconds())
	// The CPU's saturation: the share of the quota's periods in which it
	// ran out (every thread stopped until the period's end, the calls'
	// too, and the calls not yet read from their connections wait where
	// the scheduler does not see them), plus the CPU net of the yielding
	// classes over the budget.
	var saturation float64
	if c.quotaOK && b.quotaOK && c.periods > b.periods {
		saturation = min(1, max(0, float64(c.throttled-b.throttled)/float64(c.periods-b.periods)))
	}
	if c.cpuOK && b.cpuOK && budget > 0 {
		used := max(0, (c.cpu - b.cpu).Seconds())
		// Other processes in the cgroup spend its quota too, and its
		// throttling whatever the process's own load: only the process's
		// share of the cgroup's CPU counts as its saturation. A neighbour
		// that kept the quota spent read 0.84 on a replica that used
		// 0.07 CPU, and a weighted balancer sent it almost nothing
		// (docs/grpc.md#the-results).
		if group := (c.groupCPU - b.groupCPU).Seconds(); c.groupOK && b.groupOK && group > used {
			saturation *= used / group
		}
		r.CPU = used / (budget * dt)
		// Slot time beyond the process's CPU time is time the kernel ran
		// other processes, or a spent quota stopped the process: not
		// work, and the calls it delayed are counted as queued. Which
		// class's slot the kernel stopped is not known, so every class's
		// slot time is scaled by the share that ran: a replica whose spare
		// slot time runs a batch job would otherwise count its calls' slot
		// time whole where another replica's is cut to its CPU, and read
		// busier for the batch job it is meant to hide.
		yield := max(0, (c.yieldRun - b.yieldRun).Seconds())
		if held := run + yield; held > used {
			ran := used / held
			run *= ran
			yield *= ran
		}
		saturation += max(0, used-yield) / (budget * dt)
	}
	// The queued tasks count on their own, not on top of the slot time,
	// and as the utilization that a queue of their length implies, not as
	// the length itself: a weighted round robin weighs a replica by qps
	// over this, and the queue grows faster than the load (without bound
	// as the load nears the capacity), so that as a length it swung the
	// weights of equal replicas to and fro wherever arrivals came at
	// random or other processes took the CPU (docs/grpc.md#the-results).
	r.Application = max(saturation, run/slots, queueUtilization(queued/slots))
	return r
}

// overloaded returns the overload's reading over the span from f to c: where
// the Realtime and Normal tasks held at least heldShare of the slots' time
// in it (their slot time as the scheduler counts it, not cut to the CPU that
// ran: a slot whose thread the kernel did not run is held all the same, and
// the calls behind it wait) and more of them than there are slots hold or
// wait for one at c, their number over the slots; else 0; at most
// maxOverload. Slots held without a queue are left to the window's averages,
// which count a slot whose thread did not run as the CPU it got. Stats
// counts a running task's slot time so far, so a task that holds its slot
// without a Checkpoint is seen while it holds it.
func overloaded(f, c sample) float64 {
	dt := (c.at - f.at).Seconds()
	if dt <= 0 || c.workers <= 0 || c.lrLive <= c.workers {
		return 0
	}
	slots := float64(c.workers)
	if held := (c.lrRun - f.lrRun).Seconds() / (slots * dt); held < heldShare {
		return 0
	}
	return min(maxOverload, float64(c.lrLive)/slots)
}

// liveLatencyRelevant returns how many Realtime and Normal tasks of st hold
// or wait for a slot: queued for their first, or started and not in
// Blocking. Stats counts the tasks queued and those in Blocking for every
// class together, so the count is a floor: every task in Blocking is
// taken for one of these classes, and every Batch and Idle task that never
// started for one still queued. It is exact where Batch and Idle tasks
// neither block nor leave the queue unstarted, as a batch job's do.
func liveLatencyRelevant(st *cpusched.Stats) int {
	c := &st.Classes
	started := func(cl cpusched.Class) int { return int(c[cl].QueueWaits.Count()) - int(c[cl].RunTimes.Count()) }
	unstarted := func(cl cpusched.Class) int { return int(c[cl].Submitted) - int(c[cl].QueueWaits.Count()) }
	running := started(cpusched.ClassRealtime) + started(cpusched.ClassNormal) - st.Blocked
	queued := st.Queued - unstarted(cpusched.ClassBatch) - unstarted(cpusched.ClassIdle)
	return max(0, running) + max(0, queued)
}

// queueUtilization returns the utilization of the simplest queue (one
// server, Poisson arrivals, exponential service: M/M/1) whose mean number
// waiting is queued, ρ²/(1−ρ) = queued solved for ρ. There qps over ρ is
// the server's capacity, whatever its load, as it is over the CPU's
// share; the queue's length, over which qps is the capacity times
// (1−ρ)/ρ, falls steeply as the load rises. It is below 1 for any
// finite queue: past its capacity a replica reads fully busy, and its
// shed calls (eps) are what lowers its weight further.
func queueUtilization(queued float64) float64 {
	if queued <= 0 {
		return 0
	}
	return (math.Sqrt(queued*queued+4*queued) - queued) / 2
}

// quotaStat reads the throttling of the cgroup whose CPU limit applies to
// the process, finding its cpu.stat again every budgetRefresh; its read
// is a source's quota, called with the Meter's mu held.
type quotaStat struct {
	path string
	ok   bool
	at   time.Time
}

// groupCPU reads the CPU time of the processes in that cgroup, after read
// found its cpu.stat.
func (q *quotaStat) groupCPU() (time.Duration, bool) {
	if !q.ok {
		return 0, false
	}
	return cgroupcpu.GroupCPU(q.path)
}

func (q *quotaStat) read() (periods, throttled int64, ok bool) {
	if q.at.IsZero() || time.Since(q.at) >= budgetRefresh {
		path, ok, err := cgroupcpu.StatFile()
		q.path, q.ok, q.at = path, ok && err == nil, time.Now()
	}
	if !q.ok {
		return 0, 0, false
	}
	periods, throttled, err := cgroupcpu.Throttling(q.path)
	return periods, throttled, err == nil
}
