package httpsched

// The figures of one handler: its route's.

import (
	"net/http"
	"time"
)

// RouteStats are the figures of one handler that Handler or NewHandler
// made: one route's, if it is made once per route.
type RouteStats struct {
	// Overrun is the handler's running estimate of how far past the end
	// of their slice its requests' tasks run without coming to the
	// scheduler while other tasks wait: cpusched's Task.Overrun as each
	// request's handler ends, averaged over about its last 8 requests.
	// Near 0 for a handler that calls Checkpoint as it computes; for one
	// that ends in a call that cannot yield (bcrypt), about that call's
	// length less a slice while other tasks wait, and 0 while none does.
	// Work that cannot yield followed by a Checkpoint is not seen here
	// (GroupStats.Overrun sees it, for a group). At or above 2 ms, its
	// WithMaxQueueWait learns from its requests' whole waits (see
	// WithMaxQueueWait).
	Overrun time.Duration
	// Limit is WithMaxQueueWait's limit now, and InFlight the requests it
	// has admitted that have not ended; both 0 without the option. With
	// requests in several groups, each group has a limit (see
	// WithMaxQueueWait), and these are the sums over the groups.
	Limit, InFlight int
	// OverrunWait is the part of the handler's requests' waits, in all,
	// that WithMaxQueueWait's limit did not learn from: the part that
	// tasks holding their slots past their slices explain (see
	// WithMaxQueueWait); 0 without the option.
	OverrunWait time.Duration
	// Shed counts the requests the handler answered without running
	// them, by reason, since it was made: its part of Sheds(s), which
	// counts the same requests of every handler of s together.
	Shed ShedCounts
}

// RouteStatsOf returns the figures of h and true if Handler or
// NewHandler returned h; zero figures and false for any other handler. It
// reads a few atomic counters, and with WithMaxQueueWait each group's
// limit under the handler's lock. promsched exports them for each route of
// s that has a handler of its own (Auto's routes that have been heavy,
// and echosched's and ginsched's Middleware's routes) as the
// cpusched_route_ metrics its package comment lists.
func RouteStatsOf(h http.Handler) (RouteStats, bool) {
	hd, ok := h.(*handler)
	if !ok {
		return RouteStats{}, false
	}
	// The conversion compiles only while routeledger.NumShed is
	// numShedReasons: the Block's sheds are in ShedCounts' order.
	st := RouteStats{Overrun: hd.overrun.get(), OverrunWait: time.Duration(hd.counts.OverrunWait.Load()), Shed: (*sheds)(&hd.counts.Shed).counts()}
	if hd.limit != nil {
		st.Limit, st.InFlight = int(hd.limit.Current()), int(hd.limit.Inflight())
	}
	return st, true
}
