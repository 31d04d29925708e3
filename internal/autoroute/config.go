package autoroute

import (
	"net/http"
	"time"

	"github.com/cpusched/cpusched"
)

// Options is what the framework adapters' Auto (through
// internal/routesched) take from httpsched's options: what its Auto
// options (WithHeavyThreshold, WithMaxRoutes, WithRouteOf) set, zero
// values unset, and what a light route's request does.
type Options struct {
	Threshold time.Duration
	MaxRoutes int
	RouteOf   func(*http.Request) string
	// Arrive is what a light route's request does before it is served, as
	// httpsched.Auto's do: it counts the request in the scheduler's load
	// reports and, with WithLoadMetricsHeader, puts the report in w's
	// header.
	Arrive func(w http.ResponseWriter)
}

// SplitOptions takes s and a []httpsched.Option, and returns the Options
// of s that they give and the options other than Auto's, a
// []httpsched.Option, which httpsched.Handler takes without an error; or,
// for a nil s or an invalid option, the error httpsched.NewAuto returns.
// httpsched sets it as it is initialised: it imports this package, so
// this package can neither name its Option type nor read its config.
var SplitOptions func(s *cpusched.Scheduler, opts any) (auto Options, rest any, err error)
