// The auto step: hog-sched's loads on a server that serves the whole demo
// through httpsched.Auto, which finds the heavy route itself.

package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// autoRoute is the route Auto names /checksum's requests by: its mux
// pattern, whatever the query.
const autoRoute = "GET /checksum"

// Before auto's loads start, the step sends pathAutoPrime, one request at
// a time, until Auto has found /checksum heavy, at most autoPrimeMax
// times: so that the window measures Auto's steady state, not the first
// of the closed loop's requests, which all run directly (HogConcurrency
// of them at once) until one measured request has ended. 1000 passes are
// milliseconds of CPU, far above httpsched.DefaultHeavyThreshold, so on
// Linux the first request does it; where Auto cannot measure (no thread
// CPU clocks) the route stays light and the row says so.
const (
	pathAutoPrime = "/checksum?sched=0&n=1000"
	autoPrimeMax  = 8
)

// AutoResult is what Auto made of auto's CPU-heavy route over the
// measured window.
type AutoResult struct {
	Route string `json:"route"` // autoRoute
	// Heavy is whether Auto ran the route's requests as tasks over the
	// whole window: heavy at both ends, no move between.
	Heavy bool `json:"heavy"`
	// Moves counts the route's moves between heavy and light in the
	// window.
	Moves uint64 `json:"moves"`
	// CPUMs is Auto's average CPU per request of the route at the
	// window's end.
	CPUMs float64 `json:"cpu_ms"`
	// PrimeRequests is the requests sent one at a time before the loads
	// until Auto found the route heavy (autoPrimeMax if it did not).
	PrimeRequests int `json:"prime_requests"`
}

// primeAuto sends pathAutoPrime until the server's /stats shows autoRoute
// heavy, autoPrimeMax times at most, and returns how many it sent. Only
// a failed request or /stats read, or ctx's end, is an error.
func (m *meter) primeAuto(ctx context.Context) (int, error) {
	for i := 1; ; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, m.base+pathAutoPrime, nil)
		if err != nil {
			return i, err
		}
		resp, err := m.hogClient.Do(req)
		if err != nil {
			return i, fmt.Errorf("priming Auto: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return i, fmt.Errorf("priming Auto: %s: %s", pathAutoPrime, resp.Status)
		}
		st, err := fetchStats(ctx, m.statsClient, m.base)
		if err != nil {
			return i, err
		}
		if r := findAutoRoute(st.AutoRoutes); (r != nil && r.Heavy) || i == autoPrimeMax {
			return i, nil
		}
	}
}

// findAutoRoute returns autoRoute among routes, or nil.
func findAutoRoute(routes []demo.AutoRoute) *demo.AutoRoute {
	for i := range routes {
		if routes[i].Route == autoRoute {
			return &routes[i]
		}
	}
	return nil
}

// autoResult is autoRoute's figures over a window, from the /stats
// reads at its ends; nil if the server tracks no such route.
func autoResult(before, after serverStats) *AutoResult {
	a := findAutoRoute(after.AutoRoutes)
	if a == nil {
		return nil
	}
	r := &AutoResult{Route: a.Route, Moves: a.Moves, CPUMs: a.CPUMS}
	if b := findAutoRoute(before.AutoRoutes); b != nil {
		r.Moves -= min(b.Moves, a.Moves)
		r.Heavy = b.Heavy && a.Heavy && r.Moves == 0
	}
	return r
}

// autoFindings returns the auto row's summary line, or "" for none: the
// probe's p99 beside the floor's hog-sched, the load's share of direct,
// and whether Auto ran the route as tasks over the whole window.
func autoFindings(row *Result) string {
	if row == nil || row.Probe == nil {
		return ""
	}
	s := fmt.Sprintf("probe p99 %s ms with that load on the direct path of a server served whole by httpsched.Auto, no route marked%s%s",
		report.Ms(row.Probe.P99Ms), inParens(vsFloor(row)), throughput(row))
	switch a := row.Auto; {
	case a == nil:
		s += "; the server reported no Auto route " + autoRoute
	case a.Heavy:
		s += fmt.Sprintf("; Auto ran %s as tasks over the whole window (%s ms of CPU per request)", a.Route, report.Ms(a.CPUMs))
	default:
		s += fmt.Sprintf("; Auto did not run %s as tasks over the whole window (%d moves in it, %s ms of CPU per request): the row is not Auto's steady state",
			a.Route, a.Moves, report.Ms(a.CPUMs))
	}
	return s
}
