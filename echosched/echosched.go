// Package echosched runs echo (v4) routes as cpusched tasks, through
// httpsched: each request of a route that has the middleware waits for a
// worker slot and yields at Checkpoint, and is shed with 503 and
// Retry-After as httpsched.Handler sheds it.
//
// Give the middleware to the CPU-heavy routes, or to a group of them, and
// call Checkpoint in the handlers' loops:
//
//	sched := echosched.Middleware(s, httpsched.WithMaxQueueWait(100*time.Millisecond))
//	e.GET("/hash", hash, sched)
//
//	func hash(c echo.Context) error {
//		task := echosched.TaskFrom(c)
//		for _, block := range blocks {
//			digest.Write(block)
//			if err := task.Checkpoint(); err != nil { // yields when the slice ends
//				return err // the client left, or Shutdown cut the task: 503
//			}
//		}
//		return c.String(http.StatusOK, hex.EncodeToString(digest.Sum(nil)))
//	}
//
// RouteStats(s) gives each route's httpsched.RouteStats, keyed by its
// method and template ("GET /hash"): WithMaxQueueWait's limit, the
// requests in flight, the overrun estimate, the requests shed; promsched
// exports them per route.
//
// It is a module of its own, so that a program that imports cpusched
// without echo gets none of echo's modules (docs/modules.md); net/http's
// ServeMux and chi take httpsched.Handler as it is (docs/frameworks.md).
package echosched

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/routesched"
)

// call is one request's state while httpsched runs it.
type call struct {
	c    echo.Context
	next echo.HandlerFunc
	err  error // what the middleware returns to echo
}

// NewMiddleware returns the middleware Middleware does, or, for an invalid
// option, a nil s or a nil option function, the error httpsched.NewHandler
// returns for it (naming the option and its valid range) and no
// middleware.
func NewMiddleware(s *cpusched.Scheduler, opts ...httpsched.Option) (echo.MiddlewareFunc, error) {
	// The answers go through echo's HTTPErrorHandler, unless opts has a
	// WithErrorHandler of its own: the later option wins.
	opts = append([]httpsched.Option{httpsched.WithErrorHandler(answer)}, opts...)
	// echo applies a route's middleware anew for each request
	// (applyMiddleware, in Echo.add's route handler and in
	// Echo.ServeHTTP): a handler made in the function that takes next
	// would last one request. The routes' handlers live here instead.
	routes, err := routesched.New(s, (*call).run, opts)
	if err != nil {
		return nil, err
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			cl := &call{c: c, next: next}
			routes.Serve(c.Request().Method, c.Path(), cl, c.Response(), c.Request())
			return cl.err
		}
	}, nil
}

// Middleware returns echo middleware that runs each request of the routes
// it is given to through an httpsched.Handler of s with opts: one handler
// per route (method and path), made at the route's first request and
// kept as long as the middleware, so that WithMaxQueueWait learns each
// route's limit from its own requests (RouteStats gives each route's
// figures). Give it to routes one by one
// (e.GET(path, h, mw)), to a group (g.Use(mw)) or to all (e.Use(mw)); not
// to e.Pre, which runs before the route is known.
//
// The handler chain after it (the route's own middleware and handler)
// runs inside the task: c.Request() is the task's request, whose context
// is the task's context and carries the task (TaskFrom(c)), and
// c.Response() writes through httpsched's response writer (over the
// Response echo made, which the middleware before it see).
//
// A handler's error is handed to echo's HTTPErrorHandler (c.Error) while
// the task runs, as echo's Logger middleware and otelecho do, and then
// returned, so that the middleware before it see the error and echo,
// finding the response committed, writes nothing more (echo's default
// HTTPErrorHandler checks c.Response().Committed; one of the service's
// own should too). Two cases are left alone, when the task's context has
// ended and the error is cpusched.ErrClosed or a context error
// (Checkpoint's, or the context's own):
//   - Close cut the task (httpsched.Shutdown at its cut): if the handler
//     wrote nothing, httpsched answers 503 with Retry-After, as below.
//   - The request's context ended (the client left; a deadline of a
//     timeout middleware before this one passed): the error is returned
//     unhandled, for that middleware (echo's ContextTimeout answers 503)
//     or for echo.
//
// The answers httpsched gives without running the chain (Handler lists
// them: 503 with Retry-After when shedding, 400, 500), and the 503 of a
// cut task, go through echo's HTTPErrorHandler as an *echo.HTTPError of
// that status whose Internal is the cause (cpusched.ErrQueueFull,
// httpsched.ErrWaitLimit, cpusched.ErrClosed, a *cpusched.PanicError, ...;
// errors.Is and errors.As find it), written in the service's own format,
// and that error is returned. httpsched.WithErrorHandler in opts replaces
// this: its function writes them, and the middleware returns the
// handler's error, if any.
//
// A panic in the chain is httpsched's to recover: logged and answered
// 500, as above (or the response aborted if it had started).
//
// An invalid option or a nil s is a programmer's error at setup:
// Middleware panics with the error NewMiddleware would return.
//
// Cost, per request of an empty handler (BenchmarkMiddleware against
// BenchmarkEchoDirect and BenchmarkHTTPSchedHandler, httpsched.Handler
// behind echo.WrapHandler): httpsched.Handler's, about a microsecond, and
// five allocations (about 540 bytes) more, for the request with the call
// in its context and the task's echo.Response; on a busy 2-core machine
// the benchmark tells no difference in time from httpsched.Handler's.
func Middleware(s *cpusched.Scheduler, opts ...httpsched.Option) echo.MiddlewareFunc {
	mw, err := NewMiddleware(s, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// TaskFrom returns the task that runs c's request, for Checkpoint and
// Blocking, or nil outside a route that has the middleware (a nil
// *cpusched.Task is safe to use: Checkpoint returns nil, Blocking runs its
// function). It is httpsched.TaskFrom(c.Request().Context()). The task is
// valid until the handler returns.
func TaskFrom(c echo.Context) *cpusched.Task {
	return httpsched.TaskFrom(c.Request().Context())
}

// RouteStats returns the figures of each route that a Middleware (or
// NewMiddleware) of s has a handler for, keyed by its method and the
// template echo matched it to (c.Path()): "GET /users/:id", its path
// alone for a method that is not net/http's, "" for a request no route
// matched. Each is httpsched.RouteStatsOf of the route's handler: its
// overrun estimate, WithMaxQueueWait's limit and the requests it has
// admitted that have not ended (both 0 without the option), the part
// of their waits the limit left out, and the requests it answered
// without running them, by reason (Shed). promsched exports them, by
// the same names (cpusched_route_wait_limit, cpusched_route_shed_total,
// ...).
//
// A route's handler is made at its first request: a route that no
// request has reached is absent from the map, not zero. A route that
// several middlewares of s serve (two engines, each with its own) has
// their figures added up, its Overrun the largest of theirs; one
// middleware given to several routes, groups or engines keeps one
// handler per route for them all. The routes of a middleware no longer
// in use leave the map once it is collected. Auto's routes are not
// here: httpsched.AutoRoutes(s) has their figures, their handlers'
// RouteStats among them (httpsched.AutoRoute.Stats).
//
// It reads a few atomic counters per route, and allocates the map.
func RouteStats(s *cpusched.Scheduler) map[string]httpsched.RouteStats {
	return routesched.Stats[*call](s)
}

// run runs the rest of echo's chain with r, the task's request, and w,
// httpsched's response writer, and hands its error to echo's
// HTTPErrorHandler, unless the task's context has ended with it.
func (cl *call) run(w http.ResponseWriter, r *http.Request) {
	c := cl.c
	req, resp := c.Request(), c.Response()
	// A Response of its own over w: w writes to resp, so pointing resp's
	// Writer at w would make each call of resp's methods call itself
	// (a trial service overflowed its stack in Header that way).
	c.SetRequest(r)
	c.SetResponse(echo.NewResponse(w, c.Echo()))
	defer func() {
		c.SetRequest(req)
		c.SetResponse(resp)
	}()
	err := cl.next(c)
	if err != nil && !ended(r.Context(), err) {
		c.Error(err)
	}
	cl.err = err
}

// ended reports whether err is the end of ctx: cpusched.ErrClosed, or a
// context error, once ctx is done.
func ended(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, cpusched.ErrClosed) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// answer is the httpsched.WithErrorHandler function of the middleware: it
// writes httpsched's answer with echo's HTTPErrorHandler, through w.
func answer(w http.ResponseWriter, r *http.Request, status int, err error) {
	cl := routesched.Call[*call](r)
	c := cl.c
	he := echo.NewHTTPError(status).SetInternal(err)
	resp := c.Response()
	c.SetResponse(echo.NewResponse(w, c.Echo())) // w writes to resp, as in run
	defer c.SetResponse(resp)
	c.Error(he)
	cl.err = he
}
