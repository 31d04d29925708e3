package demo

import (
	"encoding/json"
	"math"
	"net/http"
	"runtime"
	"runtime/metrics"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// Stats is what GET /stats returns, as JSON. Times are in milliseconds.
type Stats struct {
	Isolation    string  `json:"isolation"`  // the mode in effect
	Workers      int     `json:"workers"`    // worker slots in effect
	GOMAXPROCS   int     `json:"gomaxprocs"` // now
	NumGoroutine int     `json:"num_goroutine"`
	Uptime       float64 `json:"uptime_s"`
	Garbage      int     `json:"garbage_bytes"` // Config.Garbage: a fast request's response buffer

	// Passes counts the CRC32 passes done since the server started, split
	// into those run on handler goroutines outside any task (sched=0) and
	// as tasks (sched=1, or with Config.Auto the requests Auto runs as
	// tasks).
	Passes       uint64 `json:"passes"`
	PassesDirect uint64 `json:"passes_direct"`
	PassesSched  uint64 `json:"passes_sched"`
	// PassesByGroup counts the passes of the tasks of each group of
	// Config.Groups (part of PassesSched), by name; absent without them.
	PassesByGroup map[string]uint64 `json:"passes_by_group,omitempty"`

	// Requests counts the requests each route received (whatever their
	// status), by path; every pprof path counts under "/debug/pprof/".
	Requests map[string]uint64 `json:"requests"`
	// AutoRoutes are the routes httpsched.Auto tracks, with Config.Auto
	// (absent without), in the order of their first requests.
	AutoRoutes []AutoRoute `json:"auto_routes,omitempty"`

	Scheduler SchedulerStats `json:"scheduler"`
	GC        GCStats        `json:"gc"`
	// SchedLatency is /sched/latencies:seconds: the time goroutines spent
	// runnable before they ran, over the process's life.
	SchedLatency Histogram `json:"sched_latency"`
}

// AutoRoute is httpsched.AutoRoute for JSON: one route's figures.
type AutoRoute struct {
	Route string `json:"route"` // the mux pattern, e.g. "GET /checksum"
	Heavy bool   `json:"heavy"` // its requests run as tasks now
	// CPUMS is its average CPU per sampled request; 0 before the first.
	CPUMS    float64 `json:"cpu_ms"`
	Requests uint64  `json:"requests"`
	Sampled  uint64  `json:"sampled"` // requests measured
	Moves    uint64  `json:"moves"`   // moves between heavy and light
}

// SchedulerStats is cpusched.Stats with every field, named for JSON.
type SchedulerStats struct {
	Submitted       uint64                `json:"submitted"`
	Completed       uint64                `json:"completed"`
	Failed          uint64                `json:"failed"`
	Canceled        uint64                `json:"canceled"`
	Panicked        uint64                `json:"panicked"`
	Rejected        uint64                `json:"rejected"`
	Preempted       uint64                `json:"preempted"`
	Queued          int                   `json:"queued"`
	Started         int                   `json:"started"`
	Running         int                   `json:"running"`
	Blocked         int                   `json:"blocked"`
	Workers         int                   `json:"workers"`
	Lent            int                   `json:"lent"`  // slots lent to the rest of the program now
	Lends           uint64                `json:"lends"` // times a slot was lent
	Isolation       string                `json:"isolation"`
	QueueWaitMS     float64               `json:"queue_wait_ms"`
	MaxQueueWaitMS  float64               `json:"max_queue_wait_ms"`
	RunTimeMS       float64               `json:"run_time_ms"`
	CPUTimeMS       float64               `json:"cpu_time_ms"`          // the CPU the tasks used: see cpusched.Stats.CPUTime
	CPUFallbackMS   float64               `json:"cpu_time_fallback_ms"` // the part of CPUTimeMS that is slot time
	LaneRunTimeMS   float64               `json:"lane_run_time_ms"`     // the part of RunTimeMS the small-task lane gave
	LentTimeMS      float64               `json:"lent_time_ms"`         // slot time lent to the rest of the program
	Contended       bool                  `json:"contended"`            // other processes keep the CPUs busy: task threads at normal priority
	Contentions     uint64                `json:"contentions"`          // times that began
	ContendedTimeMS float64               `json:"contended_time_ms"`    // its length so far
	ThreadsRaisable bool                  `json:"threads_raisable"`     // a lowered thread can be raised back here (ospriority)
	RetiredThreads  uint64                `json:"retired_threads"`      // lowered threads ended instead of raised, where they cannot be
	LooseThreads    uint64                `json:"loose_threads"`        // such threads that went back to the runtime's pool lowered instead
	IdleReleases    uint64                `json:"idle_releases"`        // slots given up by tasks with WithIdleRelease whose threads slept
	KeptSlots       uint64                `json:"kept_slots"`           // slots kept at a short task's end for the next one, not a call that cannot yield
	KeptTaken       uint64                `json:"kept_taken"`           // of those, the ones a task arriving meanwhile took
	Classes         map[string]ClassStats `json:"classes"`              // by class name
	Groups          map[string]GroupStats `json:"groups"`               // tracked groups by name ("" for none): see cpusched.Stats.Groups
	OtherGroups     GroupStats            `json:"other_groups"`         // every other group's tasks together
}

// ClassStats is cpusched.ClassStats for JSON.
type ClassStats struct {
	Submitted uint64  `json:"submitted"`
	RunTimeMS float64 `json:"run_time_ms"`
}

// GroupStats is cpusched.GroupStats for JSON.
type GroupStats struct {
	Weight    int     `json:"weight"`
	Submitted uint64  `json:"submitted"`
	Ended     uint64  `json:"ended"`
	RunTimeMS float64 `json:"run_time_ms"`
	CPUTimeMS float64 `json:"cpu_time_ms"` // as the kernel counts it: see cpusched.GroupStats.CPUTime
	OverrunMS float64 `json:"overrun_ms"`  // how far past their slices its tasks run: see cpusched.GroupStats.Overrun
}

// GCStats are the collector's figures from runtime/metrics, over the
// process's life. The two pause histograms also carry their non-empty
// buckets, so that a reader can subtract two snapshots and have the pauses
// of the time between them (cpusched bench does, for each measured window).
type GCStats struct {
	Cycles uint64 `json:"cycles"` // /gc/cycles/total:gc-cycles
	// Stopping is /sched/pauses/stopping/gc:seconds: the time to stop the
	// world (a goroutine that does not reach a safe point delays it).
	Stopping Histogram `json:"pauses_stopping"`
	// Total is /sched/pauses/total/gc:seconds: the whole stop-the-world
	// pauses.
	Total Histogram `json:"pauses_total"`
}

// Histogram summarises a runtime/metrics Float64Histogram of seconds. The
// figures are bucket bounds, so they are upper estimates within a bucket's
// width (the runtime's buckets are up to an eighth wide).
type Histogram struct {
	Count uint64  `json:"count"`
	MaxMS float64 `json:"max_ms"` // upper bound of the highest non-empty bucket
	P99MS float64 `json:"p99_ms"` // upper bound of the bucket holding the 99th percentile
	// Buckets are the non-empty buckets in ascending order (GC pauses
	// only; absent elsewhere).
	Buckets []Bucket `json:"buckets,omitempty"`
}

// Bucket is one non-empty bucket of a runtime/metrics histogram of
// seconds, in milliseconds: the values in [LoMS, HiMS), cumulative since
// the process started. JSON has no infinity: an infinite bound is written
// as the bucket's other bound (bucketValue's value for the bucket).
type Bucket struct {
	LoMS  float64 `json:"lo_ms"`
	HiMS  float64 `json:"hi_ms"`
	Count uint64  `json:"count"`
}

// Metric names read for Stats.
const (
	metricGCCycles      = "/gc/cycles/total:gc-cycles"
	metricPauseStopping = "/sched/pauses/stopping/gc:seconds"
	metricPauseTotal    = "/sched/pauses/total/gc:seconds"
	metricSchedLatency  = "/sched/latencies:seconds"
)

// Stats returns a snapshot of the server's counters, its scheduler's and the
// runtime's.
func (s *Server) Stats() Stats {
	st := Stats{
		GOMAXPROCS:    gomaxprocs(),
		NumGoroutine:  runtime.NumGoroutine(),
		Uptime:        time.Since(s.started).Seconds(),
		Garbage:       s.cfg.Garbage,
		PassesDirect:  s.passesDirect.Load(),
		PassesSched:   s.passesSched.Load(),
		PassesByGroup: s.groupPassCounts(),
		Requests:      make(map[string]uint64, len(s.requests)),
		Scheduler:     schedulerStats(s.sched.Stats()),
	}
	st.Passes = st.PassesDirect + st.PassesSched
	st.Isolation, st.Workers = st.Scheduler.Isolation, st.Scheduler.Workers
	for name, n := range s.requests {
		st.Requests[name] = n.Load()
	}
	routes, _ := httpsched.AutoRoutesOf(s.handler)
	for _, r := range routes {
		st.AutoRoutes = append(st.AutoRoutes, AutoRoute{Route: r.Route, Heavy: r.Heavy, CPUMS: ms(r.CPU),
			Requests: r.Requests, Sampled: r.Sampled, Moves: r.Moves})
	}

	samples := []metrics.Sample{
		{Name: metricGCCycles},
		{Name: metricPauseStopping},
		{Name: metricPauseTotal},
		{Name: metricSchedLatency},
	}
	metrics.Read(samples)
	for _, m := range samples {
		switch m.Value.Kind() {
		case metrics.KindUint64:
			if m.Name == metricGCCycles {
				st.GC.Cycles = m.Value.Uint64()
			}
		case metrics.KindFloat64Histogram:
			fh := m.Value.Float64Histogram()
			h := summarise(fh)
			switch m.Name {
			case metricPauseStopping:
				st.GC.Stopping = h
				st.GC.Stopping.Buckets = nonEmptyBuckets(fh)
			case metricPauseTotal:
				st.GC.Total = h
				st.GC.Total.Buckets = nonEmptyBuckets(fh)
			case metricSchedLatency:
				st.SchedLatency = h
			}
		}
		// metrics.KindBad: this Go does not have the metric; leave zeros.
	}
	return st
}

// schedulerStats converts every field of c for JSON.
func schedulerStats(c cpusched.Stats) SchedulerStats {
	st := SchedulerStats{
		Submitted:       c.Submitted,
		Completed:       c.Completed,
		Failed:          c.Failed,
		Canceled:        c.Canceled,
		Panicked:        c.Panicked,
		Rejected:        c.Rejected,
		Preempted:       c.Preempted,
		Queued:          c.Queued,
		Started:         c.Started,
		Running:         c.Running,
		Blocked:         c.Blocked,
		Workers:         c.Workers,
		Lent:            c.Lent,
		Lends:           c.Lends,
		Isolation:       c.Isolation.String(),
		QueueWaitMS:     ms(c.QueueWait),
		MaxQueueWaitMS:  ms(c.MaxQueueWait),
		RunTimeMS:       ms(c.RunTime),
		CPUTimeMS:       ms(c.CPUTime),
		CPUFallbackMS:   ms(c.CPUTimeFallback),
		LaneRunTimeMS:   ms(c.LaneRunTime),
		LentTimeMS:      ms(c.LentTime),
		Contended:       c.Contended,
		Contentions:     c.Contentions,
		ContendedTimeMS: ms(c.ContendedTime),
		ThreadsRaisable: c.ThreadsRaisable,
		RetiredThreads:  c.RetiredThreads,
		LooseThreads:    c.LooseThreads,
		IdleReleases:    c.IdleReleases,
		KeptSlots:       c.KeptSlots,
		KeptTaken:       c.KeptTaken,
		Classes:         make(map[string]ClassStats, len(c.Classes)),
		Groups:          make(map[string]GroupStats, len(c.Groups)),
	}
	for i, cs := range c.Classes {
		st.Classes[cpusched.Class(i).String()] = ClassStats{Submitted: cs.Submitted, RunTimeMS: ms(cs.RunTime)}
	}
	for name, g := range c.Groups {
		st.Groups[name] = groupStats(g)
	}
	st.OtherGroups = groupStats(c.OtherGroups)
	return st
}

func groupStats(g cpusched.GroupStats) GroupStats {
	return GroupStats{Weight: g.Weight, Submitted: g.Submitted, Ended: g.Ended, RunTimeMS: ms(g.RunTime), CPUTimeMS: ms(g.CPUTime), OverrunMS: ms(g.Overrun)}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// summarise returns the count, maximum and 99th percentile of h, a
// histogram of seconds, in milliseconds. A value is reported as the upper
// bound of its bucket, or the lower bound for the last bucket (+Inf).
func summarise(h *metrics.Float64Histogram) Histogram {
	var out Histogram
	for _, c := range h.Counts {
		out.Count += c
	}
	if out.Count == 0 {
		return out
	}
	// The 99th percentile is the value of rank ceil(0.99 * count), 1-based.
	rank := uint64(math.Ceil(0.99 * float64(out.Count)))
	var cum uint64
	p99, highest := -1, -1
	for i, c := range h.Counts {
		cum += c
		if p99 < 0 && cum >= rank {
			p99 = i
		}
		if c > 0 {
			highest = i
		}
	}
	out.P99MS = secondsToMS(bucketValue(h.Buckets, p99))
	out.MaxMS = secondsToMS(bucketValue(h.Buckets, highest))
	return out
}

// nonEmptyBuckets returns h's non-empty buckets, in ms.
func nonEmptyBuckets(h *metrics.Float64Histogram) []Bucket {
	var out []Bucket
	for i, c := range h.Counts {
		if c == 0 {
			continue
		}
		lo, hi := h.Buckets[i], h.Buckets[i+1]
		v := bucketValue(h.Buckets, i)
		if math.IsInf(lo, 0) {
			lo = v
		}
		if math.IsInf(hi, 0) {
			hi = v
		}
		out = append(out, Bucket{LoMS: secondsToMS(lo), HiMS: secondsToMS(hi), Count: c})
	}
	return out
}

// secondsToMS converts seconds to milliseconds rounded to the nanosecond,
// so that JSON shows 1.048576 rather than 1.0485760000000002.
func secondsToMS(sec float64) float64 { return math.Round(sec*1e9) / 1e6 }

// bucketValue is bucket i's upper bound, or its lower bound if the upper
// one is +Inf (0 if both are infinite).
func bucketValue(bounds []float64, i int) float64 {
	if v := bounds[i+1]; !math.IsInf(v, 0) {
		return v
	}
	if v := bounds[i]; !math.IsInf(v, 0) {
		return v
	}
	return 0
}

func (s *Server) handleStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(s.Stats())
}
