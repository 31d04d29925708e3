package httpsched

// The options of Handler and NewHandler: their defaults and ranges.

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/cpusched/cpusched"
)

// DefaultRetryAfter is the Retry-After a shed request gets without
// WithRetryAfter.
const DefaultRetryAfter = time.Second

// Limits of WithRetryAfter, as its error quotes them.
const (
	minRetryAfter = time.Second
	maxRetryAfter = 24 * time.Hour
)

// config is what the Options set; newConfig fills in the defaults first.
type config struct {
	taskOpts        []cpusched.TaskOption
	requestTaskOpts func(*http.Request) ([]cpusched.TaskOption, error)
	maxQueueWait    time.Duration                                                       // 0: no wait budget
	retryAfter      string                                                              // the header's value: whole seconds
	logger          *slog.Logger                                                        // nil: slog.Default() when logging
	loadHeader      bool                                                                // WithLoadMetricsHeader
	errorHandler    func(w http.ResponseWriter, r *http.Request, status int, err error) // nil: plain text
	auto            autoConfig                                                          // Auto's options (auto.go)
	// Set by newConfig; only the package's tests replace them
	// (export_test.go).
	now    func() time.Duration               // times the wait of a request whose task never started
	waited func(*cpusched.Task) time.Duration // a request's sample: Task.Waited
}

// An Option configures a handler in Handler or NewHandler.
type Option interface{ apply(*config) error }

type optionFunc func(*config) error

func (f optionFunc) apply(c *config) error { return f(c) }

// WithTaskOptions sets the task options (class, nice, group, slice) of every
// request of the handler. NewHandler checks them: an out-of-range one is
// its error.
func WithTaskOptions(opts ...cpusched.TaskOption) Option {
	opts = append([]cpusched.TaskOption(nil), opts...)
	return optionFunc(func(c *config) error {
		c.taskOpts = append(c.taskOpts, opts...)
		return nil
	})
}

// WithRequestTaskOptions sets a function that returns more task options for
// each request, after those of WithTaskOptions (the later of two settings
// wins): for a class or group that depends on the request, such as its
// user. fn runs on the handler goroutine before the request is admitted
// and scheduled. If fn returns an error, or an invalid option (a nice
// level outside MinNice..MaxNice, a group name longer than
// cpusched.MaxGroupNameLen bytes), the request is answered 400 Bad Request
// without running the handler; the error is logged at Info, or given to
// WithErrorHandler's function, which may show the client what was wrong.
func WithRequestTaskOptions(fn func(*http.Request) ([]cpusched.TaskOption, error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return errors.New("httpsched: WithRequestTaskOptions(nil): the function must not be nil")
		}
		c.requestTaskOpts = fn
		return nil
	})
}

// WithMaxQueueWait makes the handler shed load to keep each of its
// requests' queueing delay around d, which must be positive. The queueing
// delay is a request's whole wait for CPU: for its first worker slot, and
// for its slot back after each Checkpoint that gave it up and each Blocking
// call (Task.Waited), that is its response time minus the handler's own CPU
// and I/O time. The handler limits how many of its requests are in flight
// (queued or running) and answers 503 with Retry-After at once, without
// queueing, to a request that finds the limit reached. It learns the limit
// from the delays of its requests (less the part work that cannot yield
// explains, below), each known when its handler ends: one
// more while they wait at most d and use the whole limit, half as many
// (once per round of requests) when one waits longer, never fewer than one.
// It starts at s.Workers(), but until the first request's handler has
// ended it admits four times that many, so that a burst at startup that d
// allows is not shed before any wait is known (4 requests per slot,
// sharing the slots, each wait about 3 run times at most); that first
// request's wait then raises the limit to the requests in flight if it
// is within d, and halves it from s.Workers() if not. Without this option
// a request waits as long as its context lets it.
//
// Whether and how to set it, in short (each point is argued below): set it
// where a quick 503 serves a client better than a wait (a balancer that
// retries on another replica, a client with a deadline); leave it out
// where every request must be served. Then choose d at least a few times
// the route's own run time r, and at least twice the wait its requests
// see without the option (Task.Waited; RouteStats). The examples' 500 ms
// suits routes of a few to 60 ms with a few closed-loop clients per slot.
//
// The handler keeps a limit per group of s that its requests run in (the
// WithGroup of WithTaskOptions or WithRequestTaskOptions; the default
// group without one), each learned as above from its own group's
// requests. A request waits for its group's share of the slots
// (Scheduler.SetGroupWeight), which no limit on the other groups'
// requests shortens: a tenant of weight 25 beside tenants of 300, 100 and
// 100 gets about a twentieth of the slots, and its requests may wait past
// d with one in flight. Its limit then holds it to one request, and the
// other tenants' requests, within d, are not shed for its waits (with one
// limit per route, they were: a tenant of weight 300 whose logins waited
// 131 ms at most got 275 of the route's 608 answers 503 at a d of 300
// ms). Requests of one group at another class or nice level
// (cpusched.TaskOptionsPlace) have limits of their own too: their waits
// differ as much. The limits of up to 256 such places are kept; past
// that, the first request of a new place drops those of the places with
// no request in flight, and their next requests start cold, as above.
//
// d is a target, not a bound: the limit moves only after a request has
// waited too long, and at its floor of one request a request waits behind
// every other task of the scheduler. Under overload by requests longer
// than d on one slot, the served requests wait a few times d in total (the
// limit alternates between one request alone and two sharing the slot)
// while the slot stays busy; a client is shed at once, so the share of shed
// requests counts its retries. BenchmarkShedUnderLoad measures this against
// the rejected estimators (docs/performance.md#shedding-under-load).
//
// Choose d against the route's own run time r (a request's time on a
// slot: its response time less Task.Waited). d is a queue-wait target, so
// if r is longer than d, two requests sharing a slot each wait about the
// other's run, over d: the limit then holds the route near s.Workers()
// requests in flight, and every request beyond is answered 503 at once
// rather than queued. That serves what the workers can, but a client that
// ignores Retry-After retries at once, and its 503s take CPU from the
// requests being served (2 slots, 30 ms requests, d = 10 ms, 4 clients
// retrying at once in-process, IsolationOSPriority: 63 and 74 served in
// 1.5 s against 87 and 89 without the option). A d of a few r lets
// requests queue behind each other instead; a d below r means "shed what
// the workers cannot start at once".
//
// Count the other routes' clients too. The tasks of a group share its
// slots by time between their clients, whatever their calls' lengths, so
// with N closed-loop clients of the group in all on W = s.Workers() slots
// (the group's share of them, beside other groups), a request of run time
// r, long beside the others', waits about (N/W - 1) x r on average, only
// part of which its route's limit shortens. Beside 4 clients of 5 ms renders,
// 4 clients of logins that cannot yield (bcrypt, 62 ms of CPU) on 2 slots
// wait about 3r: 249 ms at the median, and past 300 ms a third of the
// time, where the logins took 79 ms on a 2-CPU machine that also ran
// their load generator. At a d of 300 ms each such wait halved the
// logins' limit, which stayed below 4 more than half of the time, and
// the clients, pausing 10 ms after a 503, got 790 503s for 115 logins
// served in 10.5 s; at 600 ms, none, and 142 served. Set d to about twice
// the average wait, or serve such a route with fewer clients per slot.
//
// Where the route shares the Scheduler with work that cannot yield (a
// bcrypt or gzip call on another route, which keeps its slot until it
// returns), its requests wait for such calls too, and no limit on the
// route shortens those waits. So the limit does not learn the part of a
// request's wait that tasks running past their slice explain: all of it
// while every slot holds one, and the share of the slots they hold while
// some do (RouteStats.OverrunWait adds it up;
// docs/performance.md#shedding-beside-work-that-cannot-yield). d then need
// cover only what the route's limit can shorten: a few r, and the slices
// of the tasks it shares the slots with. Two exceptions, where d must
// still cover the longest such call:
//   - Calls outside httpsched's handlers (a task of s.Go, a gRPC call
//     through grpcsched). The calls are seen in samples taken as a limited
//     request of s is queued or ends, and as a request of any httpsched
//     handler of s that ran past its slice ends; the part of a call after
//     the last sample in it is learned.
//   - A route whose own requests make such calls (RouteStats.Overrun at
//     or above 2 ms): its requests wait for each other's calls, which its
//     limit shortens, so it learns its whole waits.
//
// RouteStats.Overrun estimates how far past their slice a route's
// requests run, and GroupStats.Overrun a group's tasks: putting such work
// in a group of its own shows it wherever it runs. The load reports
// (WithLoadMetricsHeader, promsched) keep each request's whole wait.
func WithMaxQueueWait(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("httpsched: WithMaxQueueWait(%v): the wait must be positive", d)
		}
		c.maxQueueWait = d
		return nil
	})
}

// WithRetryAfter sets the Retry-After header of the 503 answers, 1s..24h
// (default DefaultRetryAfter), rounded up to whole seconds.
func WithRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) error {
		if d < minRetryAfter || d > maxRetryAfter {
			return fmt.Errorf("httpsched: WithRetryAfter(%v): must be in %v..%v", d, minRetryAfter, maxRetryAfter)
		}
		c.retryAfter = retryAfterSeconds(d)
		return nil
	})
}

// WithLogger sets the logger of the handler's panics and failures
// (Error) and of the causes of its 400 answers without WithErrorHandler
// (Info); default: slog.Default() at the time of logging.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) error {
		if l == nil {
			return errors.New("httpsched: WithLogger(nil): the logger must not be nil")
		}
		c.logger = l
		return nil
	})
}

// WithErrorHandler sets the function that writes the answers the handler
// gives in place of h (Handler's doc lists them), for a body in the
// service's own format. fn gets the response writer, the request, the
// status and its cause:
//   - 400 Bad Request: the error of WithRequestTaskOptions' function, or
//     of the invalid task option it returned;
//   - 503 Service Unavailable: cpusched.ErrQueueFull, cpusched.ErrClosed
//     (s closed before the task started, or Close cut it while h ran and
//     h wrote nothing), ErrWaitLimit (WithMaxQueueWait), or the request
//     context's error (it ended while the request was queued);
//   - 500 Internal Server Error: a *cpusched.PanicError of h, the error of
//     a task that called runtime.Goexit, or the scheduler's refusal.
//
// When fn runs, the 503's Retry-After and WithLoadMetricsHeader's header
// are set in w's headers, and nothing is written yet. fn should write a
// status (status, or another); if it writes nothing, status is sent with
// an empty body. The logs do not depend on fn: the 500s are logged (with
// the logger of WithLogger), and without fn so is each 400's cause, at
// Info.
//
// Without this option each answer's body is its status's text
// (http.StatusText, as http.Error writes it), which says nothing of the
// cause: the messages of invalid task options name the library's options,
// not what the client sent.
func WithErrorHandler(fn func(w http.ResponseWriter, r *http.Request, status int, err error)) Option {
	return optionFunc(func(c *config) error {
		if fn == nil {
			return errors.New("httpsched: WithErrorHandler(nil): the function must not be nil")
		}
		c.errorHandler = fn
		return nil
	})
}

// WithLoadMetricsHeader adds the endpoint-load-metrics header to every
// response of the handler, its own 503 and 500 answers included, for a
// balancer that weighs replicas by their load: Envoy's
// client_side_weighted_round_robin reads it. It carries the load report of
// the handler's scheduler in the text form of Envoy's ORCA parser
// (Envoy v1.33 and later): application_utilization,
// cpu_utilization, rps_fractional, eps and
// named_metrics.cpusched_queue_wait_p99_ms, the values grpcsched sends in
// its ORCA reports (docs/grpc.md#how-each-value-is-computed). The header is
// set as the response starts (its final status, first byte or flush), or
// after the handler if it wrote nothing.
func WithLoadMetricsHeader() Option {
	return optionFunc(func(c *config) error {
		c.loadHeader = true
		return nil
	})
}

// retryAfterSeconds returns d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func newConfig(opts []Option) (config, error) {
	start := time.Now()
	c := config{
		retryAfter: retryAfterSeconds(DefaultRetryAfter),
		now:        func() time.Duration { return time.Since(start) },
		waited:     (*cpusched.Task).Waited,
	}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o.apply(&c); err != nil {
			return config{}, err
		}
	}
	return c, nil
}
