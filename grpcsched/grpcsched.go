// Package grpcsched runs gRPC calls as cpusched tasks, sheds load with
// codes.Unavailable and a retry pushback, and reports the scheduler's load
// to gRPC's and Envoy's weighted balancers through ORCA.
//
// Wire it into the server; the provider's option comes first, as grpc-go's
// orca package asks, so that its interceptor runs outside these and every
// call ends with an endpoint-load-metrics-bin trailer:
//
//	srv := grpc.NewServer(
//		orca.CallMetricsServerOption(grpcsched.ServerMetricsProvider(s)),
//		grpc.ChainUnaryInterceptor(grpcsched.UnaryServerInterceptor(s, opts...)),
//		grpc.ChainStreamInterceptor(grpcsched.StreamServerInterceptor(s, opts...)),
//	)
//
// and call Checkpoint in the handlers' loops:
//
//	func (h *hasher) Sum(ctx context.Context, req *pb.SumRequest) (*pb.SumReply, error) {
//		task := grpcsched.TaskFrom(ctx)
//		for _, block := range req.Blocks {
//			digest.Write(block)
//			if err := task.Checkpoint(); err != nil { // yields when the slice ends
//				return nil, status.FromContextError(err).Err() // the client left, or s is closing
//			}
//		}
//		...
//	}
//
// docs/grpc.md has the status codes and trailers, what each reported value
// means and how it is computed, and an Envoy cluster that balances on
// them.
package grpcsched

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/admission"
	"github.com/cpusched/cpusched/internal/loadreport"
)

// DefaultPushback is the retry pushback a shed call gets without
// WithPushback: as long as httpsched's default Retry-After.
const DefaultPushback = time.Second

// Limits of WithPushback, as its error quotes them.
const maxPushback = 24 * time.Hour

// pushbackKey is the trailer of gRFC A6 that tells a client's retry policy
// how long to wait before it retries.
const pushbackKey = "grpc-retry-pushback-ms"

// config is what the Options set; newConfig fills in the defaults first.
type config struct {
	taskOpts     []cpusched.TaskOption
	callTaskOpts func(context.Context, string) ([]cpusched.TaskOption, error)
	methods      func(string) bool // nil: every method
	maxQueueWait time.Duration     // 0: no wait budget
	pushback     string            // the trailer's value: whole milliseconds
	logger       *slog.Logger      // nil: slog.Default() when logging
}

// An Option configures an interceptor.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithTaskOptions sets the task options (class, nice, group, slice) of every
// call. The interceptor's constructor checks them: an out-of-range one is
// its error. A call's kind (cpusched.WithKind) is its full method name
// unless these or WithCallTaskOptions' set another: what the scheduler
// learns of a call before it runs (whether it is small, whether it runs
// past its slices without a Checkpoint) it learns per method.
func WithTaskOptions(opts ...cpusched.TaskOption) Option {
	opts = append([]cpusched.TaskOption(nil), opts...)
	return optionFunc(func(c *config) error {
		c.taskOpts = append(c.taskOpts, opts...)
		return nil
	})
}

// WithCallTaskOptions sets a function that returns more task options for
// each call, after those of WithTaskOptions (the later of two settings
// wins), from the call's context (its metadata, its peer) and its full
// method name ("/package.Service/Method"): for a class, nice level or
// group that depends on the method or the caller. fn runs on the call's
// goroutine before the call is scheduled or counted against
// WithMaxQueueWait's limit. If fn returns an error, or an invalid option
// (a nice out of range, a group name longer than cpusched.MaxGroupNameLen),
// the call fails with codes.InvalidArgument and that error's message, and
// the handler never runs.
func WithCallTaskOptions(fn func(ctx context.Context, fullMethod string) ([]cpusched.TaskOption, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return errors.New("grpcsched: WithCallTaskOptions(nil): the function must not be nil")
		}
		c.callTaskOpts = fn
		return nil
	})
}

// WithMethods sets which methods' calls run as tasks, by full method name
// (default: all). The others run as they would without the interceptor,
// and count in the load reports' qps; gRPC's own services (health,
// ORCA's out-of-band reports, reflection) are always left alone: a health
// check must answer while the replica sheds, and ORCA's stream waits on a
// timer, which would hold a slot.
func WithMethods(fn func(fullMethod string) bool) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return errors.New("grpcsched: WithMethods(nil): the function must not be nil")
		}
		c.methods = fn
		return nil
	})
}

// WithMaxQueueWait makes the interceptor shed load to keep each call's
// queueing delay (its whole wait for CPU, Task.Waited) around d, which
// must be positive, as httpsched's WithMaxQueueWait does for a route, with
// the same limit: each method learns how many of its calls may be in
// flight (queued or running) from its calls' delays, one more while they
// wait at most d and use the whole limit, half as many when one waits
// longer, never fewer than one, starting at s.Workers() (four times that
// until a first call has ended, for a burst at startup); a call that finds
// the limit reached is answered codes.Unavailable at once, without
// queueing. d is a target, not a bound (docs/performance.md#shedding-under-load).
// Without this option a call waits as long as its deadline lets it.
//
// Each method keeps a limit per group of s that its calls run in (the
// WithGroup of WithTaskOptions or WithCallTaskOptions; the default group
// without one), each learned as above from its own group's calls. A call
// waits for its group's share of the slots (Scheduler.SetGroupWeight),
// which no limit on the other groups' calls shortens: a tenant of light
// weight, whose calls may wait past d with one in flight, is held to
// fewer calls, and the other tenants' calls are not shed for its waits.
// Calls of one group at another class or nice level
// (cpusched.TaskOptionsPlace) have limits of their own too, and a shed
// call's message names its group, class and nice level where they are
// not the defaults. The limits of up to 256 such places per method are
// kept; past that, the first call of a new place drops those of the
// places with no call in flight, and their next calls start cold. A call
// at a place other than the defaults adds a map lookup under a lock to
// find its limit.
func WithMaxQueueWait(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("grpcsched: WithMaxQueueWait(%v): the wait must be positive", d)
		}
		c.maxQueueWait = d
		return nil
	})
}

// WithPushback sets the grpc-retry-pushback-ms trailer of the calls shed
// with codes.Unavailable, 0..24h (default DefaultPushback), rounded up to
// whole milliseconds: a client whose retry policy retries Unavailable
// waits that long (gRFC A6), and may then be sent to another replica.
func WithPushback(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < 0 || d > maxPushback {
			return fmt.Errorf("grpcsched: WithPushback(%v): must be in 0s..%v", d, maxPushback)
		}
		c.pushback = pushbackMillis(d)
		return nil
	})
}

// WithLogger sets the logger of the handlers' panics and failures
// (default: slog.Default() at the time of logging).
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("grpcsched: WithLogger(nil): the logger must not be nil")
		}
		c.logger = l
		return nil
	})
}

// pushbackMillis returns d in whole milliseconds, rounded up.
func pushbackMillis(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

func newConfig(opts []Option) (config, error) {
	c := config{pushback: pushbackMillis(DefaultPushback)}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	if err := cpusched.CheckTaskOptions(c.taskOpts...); err != nil {
		return config{}, fmt.Errorf("grpcsched: WithTaskOptions: %w", err)
	}
	return c, nil
}

// interceptor is the state that a unary or a stream interceptor shares
// among its calls.
type interceptor struct {
	sched *cpusched.Scheduler
	cfg   config
	meter *loadreport.Meter  // s's, shared with every adapter of s
	place cpusched.TaskPlace // the place of WithTaskOptions' options
	// limits has each method's *admission.Groups, with WithMaxQueueWait:
	// per method, as httpsched has them per route, so that a flood of one
	// method's calls does not take the places of another's, and a limit
	// per place (group, class and nice level) of its calls, so that a
	// light group's long waits do not shed the others' calls.
	limits sync.Map
	// kinds has each method's task options: its kind (cpusched.WithKind:
	// its name), then WithTaskOptions', made once per method as limits
	// are (taskOptions).
	kinds sync.Map
}

func newInterceptor(s *cpusched.Scheduler, opts []Option) (*interceptor, error) {
	if s == nil {
		return nil, errors.New("grpcsched: the scheduler is nil")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	ic := &interceptor{sched: s, cfg: cfg, meter: loadreport.For(s)}
	ic.place, _ = cpusched.TaskOptionsPlace(cfg.taskOpts...) // checked
	return ic, nil
}

// NewUnaryServerInterceptor returns the interceptor UnaryServerInterceptor
// does, or, for an invalid option (WithTaskOptions' task options included)
// or a nil s, an error naming it and its valid range.
func NewUnaryServerInterceptor(s *cpusched.Scheduler, opts ...Option) (grpc.UnaryServerInterceptor, error) {
	ic, err := newInterceptor(s, opts)
	if err != nil {
		return nil, err
	}
	return ic.unary, nil
}

// unary is the unary interceptor.
func (ic *interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var resp any
	err := ic.call(ctx, info.FullMethod, func(md metadata.MD) { grpc.SetTrailer(ctx, md) },
		func(ctx context.Context, _ *call) error {
			var err error
			resp, err = handler(ctx, req)
			return err
		})
	return resp, err
}

// UnaryServerInterceptor returns an interceptor that runs each unary call
// as a task of s (s.Run with the call's context and the options' task
// options), so that its handler's CPU-heavy work waits for a worker slot
// and yields at Checkpoint instead of slowing the rest of the server. The
// handler's context is the task's context (cancelled too when s.Close
// gives up waiting) and carries the task: TaskFrom(ctx) returns it.
//
// Answers the interceptor gives itself, without running the handler:
//   - codes.Unavailable, with the trailer grpc-retry-pushback-ms
//     (WithPushback), when s's queue is full (cpusched.ErrQueueFull), when
//     s is closed (cpusched.ErrClosed), and when as many of the method's
//     calls are in flight as WithMaxQueueWait's limit allows;
//   - codes.Canceled or codes.DeadlineExceeded when the call's context
//     ends while it waits for a slot: the client has gone or its deadline
//     passed; the task never started and nothing is left behind;
//   - codes.InvalidArgument when WithCallTaskOptions' function returns an
//     error or an invalid option, with its message;
//   - codes.Internal when s refuses the task options for another reason,
//     logged.
//
// A panic in the handler is recovered by s, logged with its stack
// (WithLogger) and answered codes.Internal; the server lives on. Any other
// failure of a task that started (the handler called runtime.Goexit on an
// IsolationOSPriority hand-off thread) is logged and answered the same.
// The handler's own errors, status errors or not, pass through unchanged,
// but for one case: when s.Close gives up waiting and cuts the call's task
// (its context is cancelled with cause cpusched.ErrClosed and Checkpoint
// returns cpusched.ErrClosed), an error of codes.Unknown or codes.Canceled
// (Checkpoint's error as it is, status.FromContextError's of it, the
// context's error) becomes codes.Unavailable with the pushback trailer, as
// a shed call's, so that the client's retry policy retries it.
//
// Every call counts in the load reports of s (ServerMetricsProvider); with
// orca.CallMetricsServerOption it ends with the endpoint-load-metrics-bin
// trailer, in which the interceptor sets the call's own costs
// (cpusched_run_ms, cpusched_queue_wait_ms; docs/grpc.md#the-trailers).
//
// An invalid option or a nil s is a programmer's error at setup:
// UnaryServerInterceptor panics with the error NewUnaryServerInterceptor
// would return.
func UnaryServerInterceptor(s *cpusched.Scheduler, opts ...Option) grpc.UnaryServerInterceptor {
	f, err := NewUnaryServerInterceptor(s, opts...)
	if err != nil {
		panic(err)
	}
	return f
}

// NewStreamServerInterceptor returns the interceptor
// StreamServerInterceptor does, or, for an invalid option or a nil s, an
// error naming it and its valid range.
func NewStreamServerInterceptor(s *cpusched.Scheduler, opts ...Option) (grpc.StreamServerInterceptor, error) {
	ic, err := newInterceptor(s, opts)
	if err != nil {
		return nil, err
	}
	return ic.stream, nil
}

// stream is the stream interceptor.
func (ic *interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return ic.call(ss.Context(), info.FullMethod, ss.SetTrailer, func(ctx context.Context, c *call) error {
		if c == nil {
			return handler(srv, ss)
		}
		st := &serverStream{ServerStream: ss, ctx: ctx, call: c}
		defer st.done.Store(true)
		return handler(srv, st)
	})
}

// StreamServerInterceptor returns an interceptor that runs each streaming
// call as a task of s for the life of the stream, as UnaryServerInterceptor
// does a unary call, with the same answers. The handler's stream has the
// task's context, and its RecvMsg and SendMsg (Recv and Send) wait inside
// task.Blocking, so that a stream waiting for its client holds no slot:
// call them from the handler's goroutine, as Task's methods ask, and not
// after the handler has returned.
//
// An invalid option or a nil s is a programmer's error at setup:
// StreamServerInterceptor panics with the error NewStreamServerInterceptor
// would return.
func StreamServerInterceptor(s *cpusched.Scheduler, opts ...Option) grpc.StreamServerInterceptor {
	f, err := NewStreamServerInterceptor(s, opts...)
	if err != nil {
		panic(err)
	}
	return f
}

// taskKey is the handler context's key of the *cpusched.Task.
type taskKey struct{}

// TaskFrom returns the task that runs the call whose handler context is
// ctx (or a context derived from it), for Checkpoint and Blocking, or nil
// outside a handler run by the interceptors. A nil *cpusched.Task is safe
// to use (Checkpoint returns nil, Blocking runs its function), so one
// handler serves a scheduled method and one left out (WithMethods). The
// task is valid until that handler returns.
func TaskFrom(ctx context.Context) *cpusched.Task {
	t, _ := ctx.Value(taskKey{}).(*cpusched.Task)
	return t
}

// ownServices are the prefixes of gRPC's own services, which the
// interceptors leave alone (see WithMethods).
var ownServices = []string{
	"/grpc.health.v1.Health/",
	"/xds.service.orca.v3.OpenRcaService/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

func ownService(method string) bool {
	for _, p := range ownServices {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// call is one scheduled call's state, in one allocation.
type call struct {
	task     *cpusched.Task
	started  bool          // the task started; read after Run returns
	returned bool          // the handler returned (did not panic or exit)
	cut      bool          // Close cut the task (its context's cause is ErrClosed) before the handler returned
	first    time.Duration // Task.Waited when the handler began: the wait for the first slot
	waited   time.Duration // Task.Waited when it ended
	run      time.Duration // the handler's time, less its waits for a slot
	blocked  time.Duration // time in the stream's RecvMsg and SendMsg
}

// call runs fn, the handler, for a call to method with context ctx: as a
// task, unless method is left out; setTrailer sets the call's trailer.
// fn gets the handler's context and the call's state (nil when it does not
// run as a task).
func (ic *interceptor) call(ctx context.Context, method string, setTrailer func(metadata.MD),
	fn func(context.Context, *call) error) error {
	if ownService(method) {
		return fn(ctx, nil)
	}
	ic.meter.Arrive()
	// Asking for the recorder is what makes grpc-go's orca interceptor
	// send the trailer; nil without orca.CallMetricsServerOption.
	rec := orca.CallMetricsRecorderFromContext(ctx)
	if ic.cfg.methods != nil && !ic.cfg.methods(method) {
		return fn(ctx, nil)
	}
	opts, place := ic.taskOptions(method), ic.place
	if ic.cfg.callTaskOpts != nil {
		more, err := ic.cfg.callTaskOpts(ctx, method)
		if err == nil {
			opts = append(opts[:len(opts):len(opts)], more...)
			if ic.cfg.maxQueueWait > 0 { // the limit is its place's
				place, err = cpusched.TaskOptionsPlace(opts...) // checks more: the rest are checked
			} else {
				err = cpusched.CheckTaskOptions(more...)
			}
		}
		if err != nil {
			ic.meter.End(loadreport.Refused, 0)
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	var limit *admission.Limit
	var round uint64
	if ic.cfg.maxQueueWait > 0 {
		var ok bool
		if limit, round, ok = ic.limit(method).Admit(place); !ok {
			ic.meter.End(loadreport.Shed, 0)
			// The caller's own place, named so that a tenant sees whose
			// limit it met.
			msg := "grpcsched: " + method + " has its limit of calls in flight"
			if place.Group != "" {
				msg += " in group " + strconv.Quote(place.Group)
			}
			if place.Class != cpusched.ClassNormal || place.Nice != 0 {
				msg += " at class " + place.Class.String() + ", nice " + strconv.Itoa(place.Nice)
			}
			return ic.unavailable(setTrailer, msg)
		}
	}
	c := &call{}
	queuedAt := time.Now()
	err := ic.sched.Run(ctx, func(t *cpusched.Task) error {
		c.task, c.started, c.first = t, true, t.Waited()
		start := time.Now()
		// Deferred, so that a handler that panics (or calls runtime.Goexit)
		// gives its sample, and its place in the limit, back too.
		defer func() {
			c.waited = t.Waited()
			c.run = max(0, time.Since(start)-(c.waited-c.first)-c.blocked)
			if limit != nil {
				limit.Observe(c.waited, round)
			}
			ic.meter.End(loadreport.Ran, c.waited)
		}()
		taskCtx := t.Context()
		err := fn(context.WithValue(taskCtx, taskKey{}, t), c)
		c.returned = true
		c.cut = errors.Is(context.Cause(taskCtx), cpusched.ErrClosed)
		return err
	}, opts...)
	if rec != nil {
		rec.SetRequestCost(loadreport.RunCost, loadreport.Millis(c.run))
		rec.SetRequestCost(loadreport.QueueWaitCost, loadreport.Millis(c.waited))
	}
	switch {
	case c.returned && c.cut && cutError(err):
		return ic.unavailable(setTrailer, "grpcsched: the scheduler closed while the call ran")
	case c.returned:
		return err // the handler's own, unchanged
	case !c.started:
		return ic.notStarted(ctx, method, setTrailer, err, time.Since(queuedAt), limit, round)
	default:
		return ic.failed(method, err)
	}
}

// cutError reports whether err, returned by a handler whose task Close
// cut, is what a handler returns for that: Checkpoint's
// cpusched.ErrClosed or another error that is not a status (codes.Unknown),
// status.FromContextError's of it (codes.Unknown too), or the context's
// error (codes.Canceled); rather than a status code of its own.
func cutError(err error) bool {
	code := status.Code(err)
	return code == codes.Unknown || code == codes.Canceled
}

// limit returns method's limits, one per place, made at its first call.
// taskOptions returns the task options of method's calls, but for
// WithCallTaskOptions': the call's kind is its method (cpusched.WithKind),
// unless WithTaskOptions sets another, so that the scheduler learns per
// method which calls run long without a Checkpoint. The slice is shared:
// append to a copy.
func (ic *interceptor) taskOptions(method string) []cpusched.TaskOption {
	if opts, ok := ic.kinds.Load(method); ok {
		return opts.([]cpusched.TaskOption)
	}
	opts := make([]cpusched.TaskOption, 0, 1+len(ic.cfg.taskOpts))
	opts = append(append(opts, cpusched.WithKind(method)), ic.cfg.taskOpts...)
	stored, _ := ic.kinds.LoadOrStore(method, opts)
	return stored.([]cpusched.TaskOption)
}

func (ic *interceptor) limit(method string) *admission.Groups[cpusched.TaskPlace] {
	if l, ok := ic.limits.Load(method); ok {
		return l.(*admission.Groups[cpusched.TaskPlace])
	}
	l, _ := ic.limits.LoadOrStore(method, admission.NewGroups[cpusched.TaskPlace](ic.cfg.maxQueueWait, ic.sched.Workers()))
	return l.(*admission.Groups[cpusched.TaskPlace])
}

// notStarted answers a call whose task never started with err, after it
// waited waited.
func (ic *interceptor) notStarted(ctx context.Context, method string, setTrailer func(metadata.MD),
	err error, waited time.Duration, limit *admission.Limit, round uint64) error {
	cancelled := ctx.Err() != nil
	if limit != nil {
		limit.Dropped(waited, round, cancelled)
	}
	switch {
	case errors.Is(err, cpusched.ErrQueueFull):
		ic.meter.End(loadreport.Shed, 0)
		return ic.unavailable(setTrailer, "grpcsched: the scheduler's queue is full")
	case errors.Is(err, cpusched.ErrClosed):
		ic.meter.End(loadreport.Shed, 0)
		return ic.unavailable(setTrailer, "grpcsched: the scheduler is closed")
	case cancelled:
		ic.meter.End(loadreport.Left, waited)
		return status.FromContextError(ctx.Err()).Err()
	default: // the scheduler refused the task options
		ic.meter.End(loadreport.Refused, 0)
		ic.logger().Error("grpcsched: the scheduler refused the call's task", "method", method, "err", err)
		return status.Error(codes.Internal, "grpcsched: the scheduler refused the call's task options")
	}
}

// failed answers a call whose task started and did not return: the handler
// panicked, or (on a hand-off thread) called runtime.Goexit.
func (ic *interceptor) failed(method string, err error) error {
	var pe *cpusched.PanicError
	if errors.As(err, &pe) {
		ic.logger().Error("grpcsched: handler panicked", "method", method,
			"panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
		return status.Error(codes.Internal, "grpcsched: the handler panicked")
	}
	ic.logger().Error("grpcsched: handler failed", "method", method, "err", err)
	return status.Error(codes.Internal, "grpcsched: the handler failed")
}

// unavailable returns codes.Unavailable with msg, having set the pushback
// trailer.
func (ic *interceptor) unavailable(setTrailer func(metadata.MD), msg string) error {
	setTrailer(metadata.Pairs(pushbackKey, ic.cfg.pushback))
	return status.Error(codes.Unavailable, msg)
}

func (ic *interceptor) logger() *slog.Logger {
	if ic.cfg.logger != nil {
		return ic.cfg.logger
	}
	return slog.Default()
}
