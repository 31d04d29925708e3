package autoroute

import (
	"net/http"
	"time"
)

// Options is what httpsched's Auto options (WithHeavyThreshold,
// WithMaxRoutes, WithRouteOf) set, for the framework adapters' Auto
// (through internal/routesched); zero values are unset.
type Options struct {
	Threshold time.Duration
	MaxRoutes int
	RouteOf   func(*http.Request) string
}

// SplitOptions takes a []httpsched.Option and returns what its Auto
// options set and the other options, a []httpsched.Option, or the error
// of its first invalid option, as httpsched words it. httpsched sets it
// as it is initialised: it imports this package, so this package cannot
// name its Option type, nor read its config.
var SplitOptions func(opts any) (auto Options, rest any, err error)
