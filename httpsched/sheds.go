package httpsched

// The counts of the requests the handlers answer without running them.

import (
	"sync/atomic"
	"weak"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/schedmap"
)

// ShedCounts is how many requests the handlers of one Scheduler answered
// without running them, by reason, since the first of them was made.
type ShedCounts struct {
	// QueueFull: 503, the scheduler's queue was full
	// (cpusched.ErrQueueFull). The scheduler counts them too, in
	// Stats.Rejected.
	QueueFull uint64
	// WaitLimit: 503 at once, as many requests of the handler were in
	// flight as WithMaxQueueWait's limit allows (ErrWaitLimit). They never
	// reach the scheduler: no field of its Stats counts them.
	WaitLimit uint64
	// Closed: 503, the scheduler was closed before the request's task
	// started (cpusched.ErrClosed): refused (in Stats.Rejected) or removed
	// from the queue by Close (in Stats.Canceled).
	Closed uint64
	// BadOptions: 400, WithRequestTaskOptions' function returned an error
	// or an invalid task option. They never reach the scheduler.
	BadOptions uint64
}

// Sheds returns the counts of the handlers of s (every handler Handler or
// NewHandler made for s, together), all zero if there is none. It takes a
// lock briefly; the handlers count with atomic additions, only on the
// requests they shed.
//
// Each handler counts its own too, in RouteStats.Shed (RouteStatsOf;
// AutoRoute.Stats for Auto's routes, echosched's and ginsched's
// RouteStats for their Middleware's), and promsched exports both: these,
// given only the Scheduler, as cpusched_http_shed_total by reason, and
// each route's as cpusched_route_shed_total by route and reason.
// Not counted here or there: a request whose context ended while it was
// queued, and one whose handler ran and Close cut, both answered 503 (the
// scheduler counts their tasks Canceled), and the 500s (Rejected,
// Failed or Panicked). WithErrorHandler's function gets each answer's
// status and cause, those included.
func Sheds(s *cpusched.Scheduler) ShedCounts {
	c, ok := shedCounters.Load(s)
	if !ok {
		return ShedCounts{}
	}
	return c.counts()
}

// shedReason indexes a sheds array: the fields of ShedCounts.
type shedReason int

const (
	shedQueueFull shedReason = iota
	shedWaitLimit
	shedClosed
	shedBadOptions
	numShedReasons
)

// sheds is the counts of one Scheduler's handlers, or of one handler.
type sheds [numShedReasons]atomic.Uint64

// counts returns c's counts.
func (c *sheds) counts() ShedCounts {
	return ShedCounts{
		QueueFull:  c[shedQueueFull].Load(),
		WaitLimit:  c[shedWaitLimit].Load(),
		Closed:     c[shedClosed].Load(),
		BadOptions: c[shedBadOptions].Load(),
	}
}

// shedCounters holds the sheds of each Scheduler.
var shedCounters schedmap.Map[*sheds]

// shedsFor returns the sheds of s, made at the first call for s.
func shedsFor(s *cpusched.Scheduler) *sheds {
	return shedCounters.For(s, func(weak.Pointer[cpusched.Scheduler]) *sheds { return new(sheds) })
}
