package ginsched

import (
	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/autoroute"
	"github.com/cpusched/cpusched/internal/routesched"
)

// NewAuto returns the middleware Auto does, or, for an invalid option, a
// nil s or a nil option function, the error httpsched.NewAuto returns
// for it (naming the option and its valid range) and no middleware.
func NewAuto(s *cpusched.Scheduler, opts ...httpsched.Option) (gin.HandlerFunc, error) {
	// The answers record their cause in c.Errors, as Middleware's do.
	opts = append([]httpsched.Option{httpsched.WithErrorHandler(answer)}, opts...)
	auto, err := routesched.NewAuto(s, (*call).run, opts)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		rt := auto.Route(c.Request.Method, c.FullPath(), c.Request)
		if rt.Heavy() {
			cl := &call{c: c}
			auto.ServeTask(rt, cl, c.Writer, c.Request)
			if !cl.ran {
				c.Abort() // gin would run the rest of the chain after a handler that did not
			}
			return
		}
		auto.Arrive(c.Writer)
		if rt.Next() {
			serveSampled(rt, c)
			return
		}
		c.Next()
	}, nil
}

// serveSampled runs a light route's sampled request on a locked thread,
// and records its CPU time.
func serveSampled(rt *autoroute.Route, c *gin.Context) {
	defer rt.Unlock(autoroute.Lock())
	c.Next()
}

// Auto returns gin middleware for the whole engine
// (r.Use(ginsched.Auto(s))), which finds the CPU-heavy routes itself, as
// httpsched.Auto does for a net/http server: it measures the CPU each
// route's requests use and runs the requests of a route at or above
// httpsched.WithHeavyThreshold's threshold as tasks of s, as Middleware
// does (a handler per route, with opts: its WithMaxQueueWait limit; the
// answers' causes in c.Errors), and the others directly, with no task
// (TaskFrom(c) is nil). httpsched.Auto's doc says how a request's CPU is
// measured, on which sample, and what it does not see (the time spent
// waiting; the CPU handed to other goroutines; everything off Linux,
// where every route stays light). A light route's request counts in s's
// load reports too, and with httpsched.WithLoadMetricsHeader its response
// carries the report, as httpsched.Auto's do.
//
// A request's route is its method and the path gin matched it to
// (c.FullPath(), the template: "GET /users/:id"); a method that is not
// net/http's counts as none, and a request no route matched (c.FullPath()
// is "": gin's 404 and 405) is the route "". httpsched.WithRouteOf's
// function, given the request, names the routes instead. The routes past
// httpsched.WithMaxRoutes share httpsched.OtherRoute.
// httpsched.AutoRoutes(s) gives each route's figures, with those of the
// scheduler's other Auto wrappers: its CPU, whether it is heavy, and its
// handler's RouteStats (httpsched.AutoRoute.Stats; zero for a route that
// has never been heavy). promsched exports them all, the RouteStats of
// the routes that have been heavy included (cpusched_route_ metrics).
//
// One set of opts serves every route: each heavy route learns a
// WithMaxQueueWait limit of its own, but all toward the same target d;
// there is no target per route. For a route that needs one of its own (a
// 60 ms login beside 5 ms renders), give Auto to a group instead
// (g := r.Group("/", ginsched.Auto(s, opts...)), then g.GET for the
// other routes) and register that route on r with Middleware and its own
// WithMaxQueueWait. Do not give a route both: under Auto's task, its
// Middleware would run it as a task inside a task of the same Scheduler,
// which can deadlock. (The requests no route matched then run without
// Auto: gin gives them the engine's middleware only.)
//
// Cost on a light route's request, once classified (BenchmarkAutoLight
// against BenchmarkGinUse, the same engine with a middleware that calls
// c.Next): a map lookup, a few atomic operations and a sample's clock
// reads spread over the requests; no allocation.
//
// An invalid option or a nil s is a programmer's error at setup: Auto
// panics with the error NewAuto would return.
func Auto(s *cpusched.Scheduler, opts ...httpsched.Option) gin.HandlerFunc {
	mw, err := NewAuto(s, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}
