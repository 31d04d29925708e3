// Package promsched exports a cpusched.Scheduler's Stats as Prometheus
// metrics, with its load reports, its httpsched handlers' shed counts and
// its routes: its Auto wrappers', and the figures of each route's own
// httpsched handler.
//
// NewCollector returns a prometheus.Collector that takes one Stats snapshot
// per scrape and turns it into constant metrics; it starts no goroutine,
// and keeps no state of its own but the measure of the scheduler's load
// behind the two utilization metrics below, which it shares with the
// scheduler's httpsched handlers and grpcsched interceptors. Register it
// in a registry and serve that with promhttp:
//
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(promsched.NewCollector(s))
//	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The metrics, from cpusched.Stats but for the last twelve (durations in
// seconds; histograms have the buckets of cpusched.Histogram, upper bounds
// 1us<<i for i in 0..20, in seconds, and +Inf):
//
//	metric                                 type       labels   meaning (Stats field)
//	cpusched_tasks_submitted_total         counter             tasks accepted (Submitted)
//	cpusched_tasks_ended_total             counter    outcome  tasks ended, by outcome: completed, failed,
//	                                                           canceled, panicked (Completed, Failed, Canceled, Panicked)
//	cpusched_tasks_rejected_total          counter             tasks refused: closed, queue full, bad options (Rejected)
//	cpusched_preemptions_total             counter             times a task gave its slot to another at a Checkpoint (Preempted)
//	cpusched_idle_releases_total           counter             times a task's sleeping thread gave its slot up (IdleReleases; WithIdleRelease)
//	cpusched_kept_slots_total              counter             times a slot was kept for a task that yields, not a call (KeptSlots)
//	cpusched_kept_slots_taken_total        counter             the kept slots a task arriving meanwhile took (KeptTaken)
//	cpusched_tasks_queued                  gauge               accepted, not yet started (Queued)
//	cpusched_tasks_started                 gauge               started, not yet ended (Started)
//	cpusched_tasks_running                 gauge               tasks holding a slot (Running)
//	cpusched_tasks_blocked                 gauge               tasks inside Blocking (Blocked)
//	cpusched_workers                       gauge               worker slots (Workers)
//	cpusched_slots_lent                    gauge               slots lent to the rest of the program (Lent)
//	cpusched_slot_lends_total              counter             times a slot was lent (Lends)
//	cpusched_lent_slot_seconds_total       counter             slot time lent (LentTime)
//	cpusched_isolation_info                gauge      mode     1, labelled with the isolation mode in effect (Isolation)
//	cpusched_queue_wait_seconds_total      counter             time tasks waited for their first slot (QueueWait)
//	cpusched_queue_wait_max_seconds        gauge               the longest such wait (MaxQueueWait)
//	cpusched_run_seconds_total             counter             slot time used by tasks (RunTime)
//	cpusched_lane_run_seconds_total        counter             the part the small-task lane gave (LaneRunTime)
//	cpusched_cpu_seconds_total             counter             CPU time tasks used on their slots, as the kernel counts it for
//	                                                           their threads where it can be read, else slot time (CPUTime)
//	cpusched_cpu_fallback_seconds_total    counter             the part of it that is slot time (CPUTimeFallback)
//	cpusched_class_tasks_submitted_total   counter    class    tasks accepted (Classes[c].Submitted)
//	cpusched_class_run_seconds_total       counter    class    slot time used (Classes[c].RunTime)
//	cpusched_class_cpu_seconds_total       counter    class    CPU time used, as cpusched_cpu_seconds_total (Classes[c].CPUTime)
//	cpusched_class_queue_wait_seconds      histogram  class    each started task's wait for its first slot (Classes[c].QueueWaits)
//	cpusched_class_task_run_seconds        histogram  class    each ended task's total slot time (Classes[c].RunTimes)
//	cpusched_group_weight                  gauge      group    the group's weight (Groups[g].Weight)
//	cpusched_group_tasks_submitted_total   counter    group    tasks accepted (Groups[g].Submitted)
//	cpusched_group_tasks_ended_total       counter    group    tasks ended, whatever their outcome (Groups[g].Ended)
//	cpusched_group_run_seconds_total       counter    group    slot time used (Groups[g].RunTime)
//	cpusched_group_cpu_seconds_total       counter    group    CPU time used, as cpusched_cpu_seconds_total (Groups[g].CPUTime)
//	cpusched_group_queue_wait_seconds      histogram  group    as the class histogram, for the group's tasks (Groups[g].QueueWaits)
//	cpusched_group_task_run_seconds        histogram  group    as the class histogram, for the group's tasks (Groups[g].RunTimes)
//	cpusched_group_overrun_seconds         gauge      group    how far past their slice the group's tasks run before they yield (Groups[g].Overrun)
//	cpusched_application_utilization       gauge               the load grpcsched reports as ORCA's application_utilization
//	cpusched_cpu_utilization               gauge               the process's CPU over its CPU budget (ORCA's cpu_utilization)
//	cpusched_http_shed_total               counter    reason   requests httpsched answered without running their handler
//	                                                           (httpsched.Sheds): queue_full, wait_limit, closed (503),
//	                                                           bad_options (400)
//	cpusched_route_cpu_seconds             gauge      route    average CPU time per sampled request of the route
//	                                                           (httpsched.AutoRoute.CPU)
//	cpusched_route_heavy                   gauge      route    1 while the route's requests run as tasks, else 0 (Heavy)
//	cpusched_route_requests_total          counter    route    the route's requests, as tasks or directly (Requests)
//	cpusched_route_moves_total             counter    route    times the route moved between heavy and light (Moves)
//	cpusched_route_wait_limit              gauge      route    WithMaxQueueWait's limit now: the route's requests it admits
//	                                                           at once (httpsched.RouteStats.Limit)
//	cpusched_route_in_flight               gauge      route    the requests it has admitted that have not ended (InFlight)
//	cpusched_route_overrun_seconds         gauge      route    how far past their slice the route's requests run while
//	                                                           others wait, at their ends (Overrun)
//	cpusched_route_overrun_wait_seconds_total counter route    the part of its requests' waits the limit left out as
//	                                                           other work's overruns (OverrunWait)
//	cpusched_route_shed_total              counter    route,   the route's requests its handler answered without running
//	                                                  reason   them (Shed), by reason as cpusched_http_shed_total
//
// The CPU time is what the weights share: beside a busy process, or on a
// lowered thread the kernel leaves waiting, a task holds its slot longer
// than it computes, and cpusched_run_seconds_total counts the slot time,
// cpusched_cpu_seconds_total the CPU. Where no thread's CPU clock is a
// task's (IsolationReserve, IsolationNone, a task's first stretch on its
// own goroutine before its first Checkpoint: cpusched.Stats says which),
// it counts slot time, and cpusched_cpu_fallback_seconds_total says how
// much; rate(cpusched_cpu_fallback_seconds_total) over
// rate(cpusched_cpu_seconds_total) is the share of the figure that is not
// the kernel's.
//
// The two utilizations are the values of the scheduler's load reports,
// the same that grpcsched sends to gRPC's and Envoy's weighted balancers
// and httpsched's WithLoadMetricsHeader to Envoy, averaged over the last
// second (or since the previous scrape, when scrapes come less often):
// application_utilization is the largest of the latency-relevant slot
// time (of Realtime and Normal tasks, at most their share of the
// process's CPU time) over the slot capacity, the utilization that the
// mean number of them queued for a first slot implies, and the CPU's
// saturation net of Batch and Idle work (plus the share of a cgroup
// quota's periods in which it ran out), so that a replica whose spare CPU
// runs batch work does not read busy; in an overload (every slot held
// through the last quarter second, more of those tasks in than slots) it
// is at least their number per slot, above 1 at once. It is what an autoscaler should
// scale on (a Kubernetes HorizontalPodAutoscaler through the Prometheus
// adapter:
// docs/observability.md#autoscaling-on-the-utilization), and
// docs/grpc.md#how-each-value-is-computed says exactly how it is computed.
// cpusched_cpu_utilization is left out of a scrape where the process's CPU
// time cannot be read, and of one within 100 ms of the scheduler's first
// adapter (NewCollector, an httpsched handler or a grpcsched interceptor),
// before the first interval to measure it over.
//
// cpusched_http_shed_total counts what the scheduler's Stats cannot: the
// requests of the scheduler's httpsched handlers that were answered
// without running, which includes those WithMaxQueueWait's limit sheds
// before they reach the scheduler. Its reason label always takes its four
// values, zero without an httpsched handler. A full queue and a closed
// scheduler are counted in cpusched_tasks_rejected_total (or canceled, for
// a queued task Close removed) as well.
//
// The cpusched_route_ metrics are the routes of the scheduler's Auto
// wrappers (httpsched.Auto, echosched.Auto, ginsched.Auto), as
// httpsched.AutoRoutes gives them: none without one. The route label is
// the route's name (a ServeMux pattern, "GET /users/{id}"; a framework's
// template, "GET /users/:id"; httpsched.OtherRoute for the routes past
// WithMaxRoutes), so a wrapper adds at most WithMaxRoutes values, 256 by
// default. echo's and gin's requests that no route matched are the route
// "", whose series carry no route label (select them with route="").
// Two wrappers of one scheduler that name a route alike (one mux served
// on two listeners, each through an Auto of its own) make one series:
// their requests and moves are summed, heavy is 1 if the route is heavy
// in either, and the CPU is their averages weighted by their requests.
// A label per wrapper would have no name that lasts: the wrappers have
// none, and their order changes as one is dropped.
//
// The last five cpusched_route_ metrics are httpsched.RouteStats, the
// figures of a route's own httpsched handler, for every route of the
// scheduler that has one: each route of an Auto wrapper once it has
// turned heavy (httpsched.AutoRoute.Stats; a route that has never been
// heavy has none of these series), and each route of an echosched or
// ginsched Middleware that a request has reached (echosched.RouteStats,
// ginsched.RouteStats), named as Auto names it, "GET /users/:id". So
// their route labels are those of the Auto metrics, and for the
// Middleware the framework's routes: bounded too. A route that several
// handlers serve (two wrappers, two middlewares, or a Middleware and an
// Auto wrapper that name it alike) makes one series, their figures
// added up, the overrun the largest. The handler keeps a limit per group
// (WithMaxQueueWait), and cpusched_route_wait_limit is their sum over the
// groups its requests run in, as httpsched.RouteStats' Limit is: a
// route of four tenants, each held to one request, reads 4.
// cpusched_route_wait_limit and cpusched_route_in_flight are left out for
// a route whose handler has no WithMaxQueueWait; the shed counter always
// has its four reasons. A route's sheds are its part of
// cpusched_http_shed_total, which counts those of every httpsched handler
// of the scheduler, those of a Handler on no route included.
//
// The route counters (requests, moves, overrun waits, sheds) outlive the
// wrappers and handlers that counted them: a router rebuilt on a reload,
// its old wrappers collected, keeps its routes' counters where they were,
// and the new wrappers' counts add to them, so that no counter goes back
// (which Prometheus would read as a reset). The gauges are the live
// wrappers' alone. A route's counters thus stay for as long as the
// scheduler lives; the routes past 4,096 names that are gone are counted
// as httpsched.OtherRoute's.
//
// The four outcomes are one metric with an outcome label, as Prometheus'
// naming guide advises for parts of one total: sum(cpusched_tasks_ended_total)
// is every ended task, and cpusched_tasks_submitted_total minus it is
// queued + started. Rejected tasks were never accepted, so they have their
// own counter.
//
// Class-labelled and group-labelled metrics have distinct names because the
// two labels partition the same tasks twice: summing a metric over both
// would count every task twice. The class label takes the four values of
// cpusched.Class.String (normal, realtime, batch, idle), always all four; the
// group label the name of every tracked group: the default group and each
// group named by cpusched's SetGroupWeight. The tasks of all the other groups
// are counted together under group="(other)" (OtherGroups) once there is one,
// so the number of series does not grow with the number of group names a
// program uses (Prometheus' advice: bound the values of every label). A
// tracked group named "(other)" itself would be added into that series. The
// default group is named "", and Prometheus treats an empty label value as
// no label, so its series carry no group label (select them with group="").
//
// To export several schedulers from one registry, register each collector
// through prometheus.WrapRegistererWith with a distinguishing label;
// registering two directly fails with a duplicate-metrics error.
package promsched

import (
	"maps"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/loadreport"
	"github.com/cpusched/cpusched/internal/routeledger"
	"github.com/cpusched/cpusched/internal/routesched"
)

// The label values of cpusched_tasks_ended_total's outcome label.
const (
	outcomeCompleted = "completed"
	outcomePanicked  = "panicked"
	outcomeFailed    = "failed"
	outcomeCanceled  = "canceled"
)

// collector is the Collector NewCollector returns. Its fields are set once;
// Collect only reads them, so concurrent scrapes are safe.
type collector struct {
	sched *cpusched.Scheduler
	meter *loadreport.Meter // s's, shared with its other adapters

	submitted, ended, rejected, preemptions, idleReleases    *prometheus.Desc
	kept, keptTaken                                          *prometheus.Desc
	queued, started, running, blocked, workers, lent, lends  *prometheus.Desc
	lentTime                                                 *prometheus.Desc
	isolation, queueWait, queueWaitMax, runTime, laneRunTime *prometheus.Desc
	cpuTime, cpuFallback                                     *prometheus.Desc

	classSubmitted, classRunTime, classCPUTime, classQueueWaits, classRunTimes *prometheus.Desc

	groupWeight, groupSubmitted, groupEnded, groupRunTime, groupQueueWaits, groupRunTimes *prometheus.Desc
	groupCPUTime, groupOverrun                                                            *prometheus.Desc

	appUtilization, cpuUtilization *prometheus.Desc

	httpShed *prometheus.Desc

	routeCPU, routeHeavy, routeRequests, routeMoves *prometheus.Desc

	routeWaitLimit, routeInFlight, routeOverrun, routeOverrunWait, routeShed *prometheus.Desc

	// bounds are the histogram buckets' upper bounds in seconds, without the
	// last (+Inf) one.
	bounds [cpusched.HistogramBuckets - 1]float64
}

// NewCollector returns a Collector of s's Stats, with the metrics listed in
// the package comment. Each Collect calls s.Stats once, which holds s's lock
// for the copy: microseconds, and tens of microseconds for Collect and a
// fraction of a millisecond for a whole scrape with 5 groups
// (go test -bench . ./promsched/; docs/performance.md#promsched). Describe
// sends every Desc, so the collector is a checked one: registering it twice
// in one registry fails.
func NewCollector(s *cpusched.Scheduler) prometheus.Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("cpusched_"+name, help, labels, nil)
	}
	c := &collector{
		sched:        s,
		meter:        loadreport.For(s),
		submitted:    desc("tasks_submitted_total", "Tasks the scheduler accepted."),
		ended:        desc("tasks_ended_total", "Tasks that ended, by outcome: completed (nil error), failed (an error), canceled (context ended or Close), panicked.", "outcome"),
		rejected:     desc("tasks_rejected_total", "Tasks the scheduler refused: closed, queue full, or an out-of-range option."),
		preemptions:  desc("preemptions_total", "Times a task gave its slot to another at a Checkpoint."),
		idleReleases: desc("idle_releases_total", "Times a task whose thread slept without Blocking gave its slot up (WithIdleRelease)."),
		kept:         desc("kept_slots_total", "Times a slot a task that yields left was kept for the next such task, not given to a waiting call that cannot yield."),
		keptTaken:    desc("kept_slots_taken_total", "Kept slots that a task arriving meanwhile took."),
		queued:       desc("tasks_queued", "Tasks accepted and not yet started."),
		started:      desc("tasks_started", "Tasks started and not yet ended."),
		running:      desc("tasks_running", "Tasks holding a worker slot."),
		blocked:      desc("tasks_blocked", "Tasks inside Blocking."),
		workers:      desc("workers", "Worker slots."),
		lent:         desc("slots_lent", "Slots IsolationOSPriority lends to the rest of the program, which keeps its Ps busy."),
		lends:        desc("slot_lends_total", "Times IsolationOSPriority lent a slot to the rest of the program."),
		lentTime:     desc("lent_slot_seconds_total", "Slot time IsolationOSPriority lent to the rest of the program."),
		isolation:    desc("isolation_info", "Always 1; the mode label is the isolation mode in effect.", "mode"),
		queueWait:    desc("queue_wait_seconds_total", "Time tasks waited for their first slot."),
		queueWaitMax: desc("queue_wait_max_seconds", "The longest time a task waited for its first slot."),
		runTime:      desc("run_seconds_total", "Slot time used by tasks."),
		laneRunTime:  desc("lane_run_seconds_total", "The part of the slot time the small-task lane gave."),
		cpuTime:      desc("cpu_seconds_total", "CPU time tasks used on their slots, as the kernel counts it for their threads where it can be read, else slot time."),
		cpuFallback:  desc("cpu_fallback_seconds_total", "The part of cpusched_cpu_seconds_total that is slot time: no thread's CPU clock was the task's."),

		classSubmitted:  desc("class_tasks_submitted_total", "Tasks the scheduler accepted, by class.", "class"),
		classRunTime:    desc("class_run_seconds_total", "Slot time used by tasks, by class.", "class"),
		classCPUTime:    desc("class_cpu_seconds_total", "CPU time tasks used on their slots, as cpusched_cpu_seconds_total, by class.", "class"),
		classQueueWaits: desc("class_queue_wait_seconds", "Each started task's wait for its first slot, by class.", "class"),
		classRunTimes:   desc("class_task_run_seconds", "Each ended task's total slot time, by class.", "class"),

		groupWeight:     desc("group_weight", "The group's weight: groups share slot time in proportion to it.", "group"),
		groupSubmitted:  desc("group_tasks_submitted_total", "Tasks the scheduler accepted, by group.", "group"),
		groupEnded:      desc("group_tasks_ended_total", "Tasks that ended, whatever their outcome, by group.", "group"),
		groupRunTime:    desc("group_run_seconds_total", "Slot time used by tasks, by group.", "group"),
		groupCPUTime:    desc("group_cpu_seconds_total", "CPU time tasks used on their slots, as cpusched_cpu_seconds_total, by group.", "group"),
		groupQueueWaits: desc("group_queue_wait_seconds", "Each started task's wait for its first slot, by group.", "group"),
		groupRunTimes:   desc("group_task_run_seconds", "Each ended task's total slot time, by group.", "group"),
		groupOverrun:    desc("group_overrun_seconds", "The scheduler's estimate of how far past the end of their slice the group's tasks run before they come to it (near 0 for work that yields at Checkpoint, about a task's length for work that cannot).", "group"),

		appUtilization: desc("application_utilization", "The replica's load as grpcsched reports it (ORCA application_utilization): Realtime and Normal slot time and waits over the slot capacity, or the CPU's saturation net of Batch and Idle, the larger, over the last second; in an overload, at least the Realtime and Normal tasks in per slot, up to 10."),
		cpuUtilization: desc("cpu_utilization", "The process's CPU time over its CPU budget (GOMAXPROCS, the cgroup limit), over the last second (ORCA cpu_utilization)."),

		httpShed: desc("http_shed_total", "Requests httpsched answered without running their handler, by reason: queue_full, wait_limit (WithMaxQueueWait), closed (503), bad_options (400).", "reason"),

		routeCPU:      desc("route_cpu_seconds", "Average CPU time per sampled request of a route of an Auto wrapper (httpsched.Auto, echosched.Auto, ginsched.Auto).", "route"),
		routeHeavy:    desc("route_heavy", "1 while an Auto wrapper runs the route's requests as tasks, else 0.", "route"),
		routeRequests: desc("route_requests_total", "Requests of a route of an Auto wrapper, as tasks or directly.", "route"),
		routeMoves:    desc("route_moves_total", "Times a route of an Auto wrapper moved between heavy (tasks) and light (direct).", "route"),

		routeWaitLimit:   desc("route_wait_limit", "WithMaxQueueWait's limit of the route's httpsched handler now: its requests admitted at once.", "route"),
		routeInFlight:    desc("route_in_flight", "Requests WithMaxQueueWait's limit of the route's httpsched handler has admitted that have not ended.", "route"),
		routeOverrun:     desc("route_overrun_seconds", "The route's httpsched handler's estimate of how far past the end of their slice its requests run while other tasks wait.", "route"),
		routeOverrunWait: desc("route_overrun_wait_seconds_total", "The part of the route's requests' waits that WithMaxQueueWait's limit left out as other work's overruns.", "route"),
		routeShed:        desc("route_shed_total", "Requests the route's httpsched handler answered without running them, by reason: queue_full, wait_limit (WithMaxQueueWait), closed (503), bad_options (400).", "route", "reason"),
	}
	for i := range c.bounds {
		c.bounds[i] = cpusched.BucketBound(i).Seconds()
	}
	return c
}

// descs returns every Desc of c, in Describe's order.
func (c *collector) descs() []*prometheus.Desc {
	return []*prometheus.Desc{
		c.submitted, c.ended, c.rejected, c.preemptions, c.idleReleases, c.kept, c.keptTaken,
		c.queued, c.started, c.running, c.blocked, c.workers, c.lent, c.lends, c.lentTime,
		c.isolation, c.queueWait, c.queueWaitMax, c.runTime, c.laneRunTime, c.cpuTime, c.cpuFallback,
		c.classSubmitted, c.classRunTime, c.classCPUTime, c.classQueueWaits, c.classRunTimes,
		c.groupWeight, c.groupSubmitted, c.groupEnded, c.groupRunTime, c.groupCPUTime, c.groupQueueWaits, c.groupRunTimes, c.groupOverrun,
		c.appUtilization, c.cpuUtilization, c.httpShed,
		c.routeCPU, c.routeHeavy, c.routeRequests, c.routeMoves,
		c.routeWaitLimit, c.routeInFlight, c.routeOverrun, c.routeOverrunWait, c.routeShed,
	}
}

// Describe sends the Desc of every metric the collector may collect.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs() {
		ch <- d
	}
}

// Collect sends the metrics of one Stats snapshot.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	st := c.sched.Stats()
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}

	counter(c.submitted, float64(st.Submitted))
	counter(c.ended, float64(st.Completed), outcomeCompleted)
	counter(c.ended, float64(st.Failed), outcomeFailed)
	counter(c.ended, float64(st.Canceled), outcomeCanceled)
	counter(c.ended, float64(st.Panicked), outcomePanicked)
	counter(c.rejected, float64(st.Rejected))
	counter(c.preemptions, float64(st.Preempted))
	counter(c.idleReleases, float64(st.IdleReleases))
	counter(c.kept, float64(st.KeptSlots))
	counter(c.keptTaken, float64(st.KeptTaken))
	gauge(c.queued, float64(st.Queued))
	gauge(c.started, float64(st.Started))
	gauge(c.running, float64(st.Running))
	gauge(c.blocked, float64(st.Blocked))
	gauge(c.workers, float64(st.Workers))
	gauge(c.lent, float64(st.Lent))
	counter(c.lends, float64(st.Lends))
	counter(c.lentTime, st.LentTime.Seconds())
	gauge(c.isolation, 1, st.Isolation.String())
	counter(c.queueWait, st.QueueWait.Seconds())
	gauge(c.queueWaitMax, st.MaxQueueWait.Seconds())
	counter(c.runTime, st.RunTime.Seconds())
	counter(c.laneRunTime, st.LaneRunTime.Seconds())
	counter(c.cpuTime, st.CPUTime.Seconds())
	counter(c.cpuFallback, st.CPUTimeFallback.Seconds())

	for i, cs := range st.Classes {
		class := cpusched.Class(i).String()
		counter(c.classSubmitted, float64(cs.Submitted), class)
		counter(c.classRunTime, cs.RunTime.Seconds(), class)
		counter(c.classCPUTime, cs.CPUTime.Seconds(), class)
		ch <- c.histogram(c.classQueueWaits, &cs.QueueWaits, class)
		ch <- c.histogram(c.classRunTimes, &cs.RunTimes, class)
	}
	groups := st.Groups
	if st.OtherGroups.Submitted > 0 {
		groups = maps.Clone(st.Groups)
		groups[OtherGroups] = mergeGroups(groups[OtherGroups], st.OtherGroups)
	}
	for group, gs := range groups {
		gauge(c.groupWeight, float64(gs.Weight), group)
		counter(c.groupSubmitted, float64(gs.Submitted), group)
		counter(c.groupEnded, float64(gs.Ended), group)
		counter(c.groupRunTime, gs.RunTime.Seconds(), group)
		counter(c.groupCPUTime, gs.CPUTime.Seconds(), group)
		ch <- c.histogram(c.groupQueueWaits, &gs.QueueWaits, group)
		ch <- c.histogram(c.groupRunTimes, &gs.RunTimes, group)
		gauge(c.groupOverrun, gs.Overrun.Seconds(), group)
	}

	r := c.meter.Report()
	gauge(c.appUtilization, r.Application)
	if r.CPU >= 0 {
		gauge(c.cpuUtilization, r.CPU)
	}

	// shed sends d's series of sheds, one per reason, the reason the last
	// label after labels.
	shed := func(d *prometheus.Desc, sheds httpsched.ShedCounts, labels ...string) {
		for _, r := range []struct {
			reason string
			n      uint64
		}{{"queue_full", sheds.QueueFull}, {"wait_limit", sheds.WaitLimit}, {"closed", sheds.Closed}, {"bad_options", sheds.BadOptions}} {
			counter(d, float64(r.n), append(labels[:len(labels):len(labels)], r.reason)...)
		}
	}
	shed(c.httpShed, httpsched.Sheds(c.sched))

	// The routes' gauges are their live wrappers' and handlers'; their
	// counters the scheduler's ledger's, which keeps the counts of the
	// wrappers and handlers that are gone, so that no counter goes back
	// when a router is rebuilt.
	autoRoutes := httpsched.AutoRoutes(c.sched)
	for _, r := range mergeRoutes(autoRoutes) {
		gauge(c.routeCPU, r.CPU.Seconds(), r.Route)
		heavy := 0.0
		if r.Heavy {
			heavy = 1
		}
		gauge(c.routeHeavy, heavy, r.Route)
	}
	for route, st := range routeStats(autoRoutes, routesched.AllStats(c.sched)) {
		if st.Limit > 0 {
			gauge(c.routeWaitLimit, float64(st.Limit), route)
			gauge(c.routeInFlight, float64(st.InFlight), route)
		}
		gauge(c.routeOverrun, st.Overrun.Seconds(), route)
	}
	if ledger, ok := routeledger.Load(c.sched); ok {
		for route, t := range ledger.Totals() {
			if t.Table && t.Requests > 0 { // every table's other route has a Block from the start
				counter(c.routeRequests, float64(t.Requests), route)
				counter(c.routeMoves, float64(t.Moves), route)
			}
			if t.Handler {
				counter(c.routeOverrunWait, t.OverrunWait.Seconds(), route)
				shed(c.routeShed, httpsched.ShedCounts{QueueFull: t.Shed[0], WaitLimit: t.Shed[1], Closed: t.Shed[2], BadOptions: t.Shed[3]}, route)
			}
		}
	}
}

// routeStats returns the RouteStats of every route that has a handler of
// its own: middleware's (an adapter Middleware's routes, which it adds
// to) and each of autoRoutes that has been heavy, those named alike
// added up (routesched.Add), as the package comment says.
func routeStats(autoRoutes []httpsched.AutoRoute, middleware map[string]httpsched.RouteStats) map[string]httpsched.RouteStats {
	stats := middleware
	for _, r := range autoRoutes {
		if !r.Heavy && r.Moves == 0 { // never heavy: no handler, no figures
			continue
		}
		if prev, ok := stats[r.Route]; ok {
			r.Stats = routesched.Add(prev, r.Stats)
		}
		stats[r.Route] = r.Stats
	}
	return stats
}

// mergeRoutes returns routes with those of one name made one, as the
// package comment says, in the order of their first.
func mergeRoutes(routes []httpsched.AutoRoute) []httpsched.AutoRoute {
	at := make(map[string]int, len(routes))
	var merged []httpsched.AutoRoute
	// weight is each merged route's requests that have an average: a
	// route not yet sampled has none.
	var weight []float64
	for _, r := range routes {
		w := 0.0
		if r.Sampled > 0 {
			w = float64(r.Requests)
		}
		i, ok := at[r.Route]
		if !ok {
			at[r.Route] = len(merged)
			merged = append(merged, r)
			weight = append(weight, w)
			continue
		}
		m := &merged[i]
		if total := weight[i] + w; total > 0 {
			m.CPU = time.Duration((float64(m.CPU)*weight[i] + float64(r.CPU)*w) / total)
			weight[i] = total
		}
		m.Heavy = m.Heavy || r.Heavy
		m.Requests += r.Requests
		m.Sampled += r.Sampled
		m.Moves += r.Moves
	}
	return merged
}

// OtherGroups is the group label value of the series that count the tasks
// of every untracked group together (cpusched.Stats.OtherGroups).
const OtherGroups = "(other)"

// mergeGroups adds b's counts to a's; the weight is b's.
func mergeGroups(a, b cpusched.GroupStats) cpusched.GroupStats {
	a.Weight = b.Weight
	a.Submitted += b.Submitted
	a.Ended += b.Ended
	a.RunTime += b.RunTime
	a.CPUTime += b.CPUTime
	a.Overrun = max(a.Overrun, b.Overrun)
	for _, h := range []struct{ dst, src *cpusched.Histogram }{{&a.QueueWaits, &b.QueueWaits}, {&a.RunTimes, &b.RunTimes}} {
		for i := range h.dst.Counts {
			h.dst.Counts[i] += h.src.Counts[i]
		}
		h.dst.Sum += h.src.Sum
	}
	return a
}

// histogram converts h, whose counts are per bucket, to a Prometheus
// histogram, whose counts are cumulative; h's last bucket, which has no
// bound, is the implicit +Inf bucket.
func (c *collector) histogram(d *prometheus.Desc, h *cpusched.Histogram, label string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(c.bounds))
	var cumulative uint64
	for i, bound := range c.bounds {
		cumulative += h.Counts[i]
		buckets[bound] = cumulative
	}
	count := cumulative + h.Counts[len(h.Counts)-1]
	return prometheus.MustNewConstHistogram(d, count, h.Sum.Seconds(), buckets, label)
}
