// Package ginsched runs gin routes as cpusched tasks, through httpsched:
// each request of a route that has the middleware waits for a worker slot
// and yields at Checkpoint, and is shed with 503 and Retry-After as
// httpsched.Handler sheds it.
//
// Give the middleware to the CPU-heavy routes, or to a group of them, and
// call Checkpoint in the handlers' loops:
//
//	sched := ginsched.Middleware(s, httpsched.WithMaxQueueWait(100*time.Millisecond))
//	r.GET("/hash", sched, hash)
//
//	func hash(c *gin.Context) {
//		task := ginsched.TaskFrom(c)
//		for _, block := range blocks {
//			digest.Write(block)
//			if err := task.Checkpoint(); err != nil { // yields when the slice ends
//				c.Error(err) // the client left, or Shutdown cut the task: 503
//				return
//			}
//		}
//		c.String(http.StatusOK, hex.EncodeToString(digest.Sum(nil)))
//	}
//
// RouteStats(s) gives each route's httpsched.RouteStats, keyed by its
// method and template ("GET /hash"): WithMaxQueueWait's limit, the
// requests in flight, the overrun estimate, the requests shed; promsched
// exports them per route.
//
// It is a module of its own, so that a program that imports cpusched
// without gin gets none of gin's modules (docs/modules.md); net/http's
// ServeMux and chi take httpsched.Handler as it is (docs/frameworks.md).
package ginsched

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/routesched"
)

// call is one request's state while httpsched runs it.
type call struct {
	c   *gin.Context
	ran bool // the chain ran, inside the task
}

// NewMiddleware returns the middleware Middleware does, or, for an invalid
// option, a nil s or a nil option function, the error httpsched.NewHandler
// returns for it (naming the option and its valid range) and no
// middleware.
func NewMiddleware(s *cpusched.Scheduler, opts ...httpsched.Option) (gin.HandlerFunc, error) {
	// The answers record their cause in c.Errors, unless opts has a
	// WithErrorHandler of its own: the later option wins.
	opts = append([]httpsched.Option{httpsched.WithErrorHandler(answer)}, opts...)
	// gin builds a route's chain once, at registration, so one middleware
	// given to a group or to r.Use serves all of its routes: each has its
	// handler here, for a WithMaxQueueWait limit of its own.
	routes, err := routesched.New(s, (*call).run, opts)
	if err != nil {
		return nil, err
	}
	return func(c *gin.Context) {
		cl := &call{c: c}
		routes.Serve(c.Request.Method, c.FullPath(), cl, c.Writer, c.Request)
		if !cl.ran {
			c.Abort() // gin would run the rest of the chain after a handler that did not
		}
	}, nil
}

// Middleware returns gin middleware that runs each request of the routes
// it is given to through an httpsched.Handler of s with opts: one handler
// per route (method and full path), made at the route's first request and
// kept as long as the middleware, so that WithMaxQueueWait learns each
// route's limit from its own requests (RouteStats gives each route's
// figures). Give it to routes one by one
// (r.GET(path, mw, h)), to a group (g.Use(mw)) or to all (r.Use(mw)).
//
// The handlers after it in the chain (the route's own middleware and
// handler) run inside the task, in its c.Next(): c.Request is the task's
// request, whose context is the task's context and carries the task
// (TaskFrom(c)), and c.Writer writes through httpsched's response writer
// (over gin's, which the handlers before it see). So what they write,
// an abort's status included (c.AbortWithStatus, c.AbortWithStatusJSON,
// c.AbortWithError), is written while the task runs; a middleware after
// this one that renders c.Errors runs inside the task too, one before it
// after the task has ended.
//
// When Close cuts the task (httpsched.Shutdown at its cut) or the
// request's context ends, Checkpoint returns an error: the handler should
// then record it (c.Error) and return without writing. If Close cut it,
// httpsched answers 503 with Retry-After, as below. A middleware before
// this one that renders c.Errors should leave a response already
// written alone (c.Writer.Written()).
//
// The answers httpsched gives without running the chain (Handler lists
// them: 503 with Retry-After when shedding, 400, 500), and the 503 of a
// cut task, are written as httpsched writes them (the status's text) and
// abort the chain; their cause (cpusched.ErrQueueFull,
// httpsched.ErrWaitLimit, cpusched.ErrClosed, a *cpusched.PanicError,
// ...) is added to c.Errors, where gin's Logger prints it.
// httpsched.WithErrorHandler in opts replaces this: its function writes
// them, and the chain is still aborted.
//
// A panic in the chain is httpsched's to recover: logged and answered
// 500, as above (or the response aborted if it had started).
//
// An invalid option or a nil s is a programmer's error at setup:
// Middleware panics with the error NewMiddleware would return.
//
// Cost, per request of an empty handler (BenchmarkMiddleware against
// BenchmarkGinDirect and BenchmarkHTTPSchedHandler, httpsched.Handler
// behind gin.WrapH): httpsched.Handler's, about a microsecond, and four
// allocations (about 420 bytes) more, for the request with the call in
// its context and the task's c.Writer; on a busy 2-core machine the
// benchmark tells no difference in time from httpsched.Handler's.
func Middleware(s *cpusched.Scheduler, opts ...httpsched.Option) gin.HandlerFunc {
	mw, err := NewMiddleware(s, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// TaskFrom returns the task that runs c's request, for Checkpoint and
// Blocking, or nil outside a route that has the middleware (a nil
// *cpusched.Task is safe to use: Checkpoint returns nil, Blocking runs its
// function). It is httpsched.TaskFrom(c.Request.Context()). The task is
// valid until the handler returns.
func TaskFrom(c *gin.Context) *cpusched.Task {
	return httpsched.TaskFrom(c.Request.Context())
}

// RouteStats returns the figures of each route that a Middleware (or
// NewMiddleware) of s has a handler for, keyed by its method and the
// template gin matched it to (c.FullPath()): "GET /users/:id", its path
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

// run runs the rest of gin's chain with r, the task's request, and a
// c.Writer that writes through w, httpsched's response writer.
func (cl *call) run(w http.ResponseWriter, r *http.Request) {
	c := cl.c
	cl.ran = true
	req, writer := c.Request, c.Writer
	// A writer of its own over w: w writes to gin's writer, so gin's
	// writer must not write to w.
	c.Request, c.Writer = r, &taskWriter{ResponseWriter: writer, task: w}
	defer func() { c.Request, c.Writer = req, writer }()
	c.Next()
}

// answer is the httpsched.WithErrorHandler function of the middleware:
// the status's text, as httpsched writes it, with the cause in c.Errors.
func answer(w http.ResponseWriter, r *http.Request, status int, err error) {
	c := routesched.Call[*call](r).c
	if err != nil {
		c.Error(err)
	}
	c.Abort()
	http.Error(w, http.StatusText(status), status)
}

// taskWriter is c.Writer while the task runs: gin's ResponseWriter, with
// the calls that send the response going through httpsched's writer,
// which writes to gin's. A status set with WriteHeader stays gin's until
// it is sent (WriteHeaderNow, the first byte or a flush), as gin has it:
// httpsched counts the response started then.
type taskWriter struct {
	gin.ResponseWriter                     // gin's: WriteHeader, Status, Size, Written, Hijack, Pusher
	task               http.ResponseWriter // httpsched's, over gin's
}

var _ gin.ResponseWriter = (*taskWriter)(nil)

func (w *taskWriter) Write(b []byte) (int, error) { return w.task.Write(b) }

func (w *taskWriter) WriteString(s string) (int, error) { return w.task.Write([]byte(s)) }

// WriteHeaderNow sends gin's status, if not yet sent.
func (w *taskWriter) WriteHeaderNow() {
	if !w.Written() {
		w.task.WriteHeader(w.Status()) // httpsched's marks the start; gin's keeps the status
	}
	w.ResponseWriter.WriteHeaderNow()
}

// Flush sends the status, if not yet sent, and what was written.
func (w *taskWriter) Flush() { http.NewResponseController(w.task).Flush() }

// Unwrap returns httpsched's writer, for http.ResponseController.
func (w *taskWriter) Unwrap() http.ResponseWriter { return w.task }
