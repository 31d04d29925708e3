package httpsched

import (
	"net/http"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/loadreport"
)

// The framework adapters' Auto (echosched, ginsched) take this package's
// options: its Auto options for their route table, the others for each
// heavy route's Handler. Splitting them needs the unexported config, so
// this package hands internal/autoroute the function that does.
func init() { autoroute.SplitOptions = splitAutoOptions }

// splitAutoOptions is autoroute.SplitOptions: opts is a []Option, and so
// is rest.
func splitAutoOptions(s *cpusched.Scheduler, opts any) (autoroute.Options, any, error) {
	rest := []Option{WithTaskOptions(autoTaskOptions(nil)...)} // before the user's: theirs win
	for _, o := range opts.([]Option) {
		if o == nil {
			continue
		}
		var c config
		if err := o.apply(&c); err != nil {
			return autoroute.Options{}, nil, err
		}
		if len(c.auto.names) == 0 {
			rest = append(rest, o)
		}
	}
	// The adapters have no handler to check here: a stand-in serves.
	cfg, err := checkConfig(s, http.NotFoundHandler(), opts.([]Option))
	if err != nil {
		return autoroute.Options{}, nil, err
	}
	auto := autoroute.Options{Threshold: cfg.auto.threshold, MaxRoutes: cfg.auto.maxRoutes, RouteOf: cfg.auto.routeOf}
	// What autoHandler.ServeHTTP does for a light route's request.
	light := &handler{cfg: cfg, meter: loadreport.For(s)}
	auto.Arrive = func(w http.ResponseWriter) {
		light.meter.Arrive()
		light.addLoadHeader(w)
	}
	return auto, rest, nil
}
