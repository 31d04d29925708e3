// Package drain stops a server and the Scheduler its handlers run on by
// one deadline: the protocol behind httpsched.Shutdown and
// grpcsched.GracefulStop.
//
// A server's graceful stop (http.Server.Shutdown, grpc.Server.GracefulStop)
// stops taking requests and waits for those in flight; Scheduler.Close
// waits for its tasks, and cuts them when its context ends. Neither alone
// knows when to give up on the other's work, and the two obvious orders
// fail:
//   - The server's stop, then Close, with one context: the stop waits for
//     handlers whose tasks nothing cuts (queued behind a long one, or
//     computing) until the deadline and returns its error; Close then
//     cuts them at once and returns, and the program exits while their
//     handlers are answering: the clients see their connections reset.
//     (A trial service did this.)
//   - Close, then the server's stop: Close waits for the tasks first, and
//     cuts them only at the deadline, which leaves the stop no time.
//
// The protocol, given the stop, a force (http.Server.Close,
// grpc.Server.Stop) and a context with a deadline:
//  1. stop(ctx) runs on its own goroutine: the server takes no new
//     requests and waits for those in flight.
//  2. At the same time Close(cut), where cut ends Grace before ctx's
//     deadline (half the time left, if that is less than twice Grace).
//     From now on a scheduled request is refused (503, Unavailable) and
//     the tasks in flight go on. If they end first, Close returns nil and
//     the server's stop waits only for its other handlers.
//  3. At cut, Close removes the queued tasks (their requests answer 503
//     or Unavailable at once) and cancels the running ones (Checkpoint
//     returns cpusched.ErrClosed; the adapters answer 503 or Unavailable
//     for a handler that returns it without writing).
//  4. Grace is left for those answers to reach their clients and for the
//     stop to see its connections end: http.Server.Shutdown looks every
//     500 ms at most.
//  5. If ctx ends first, force closes what is left: the connections of
//     handlers that ignored the cut (no Checkpoint, no look at the
//     context). Then Close(ctx) once more, which returns at once if the
//     deadline has passed: the whole takes at most the one deadline.
package drain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cpusched/cpusched"
)

// Grace is how long before the deadline the tasks still in flight are
// cut, so that their answers are sent before the server is forced shut.
// It must cover a cut handler's return (a Checkpoint away) and
// http.Server.Shutdown's look at its connections, every 500 ms once it
// has waited that long (shutdownPollIntervalMax in net/http).
const Grace = time.Second

// CutAt returns when the tasks of a stop that began at now and must end
// by deadline are cut: Grace before deadline, or half-way if less than
// twice Grace is left, or now if the deadline has passed.
func CutAt(now, deadline time.Time) time.Time {
	left := deadline.Sub(now)
	if left <= 0 {
		return now
	}
	return deadline.Add(-min(Grace, left/2))
}

// Stop stops a server and s by ctx's deadline, as the package comment
// says: stop is the server's graceful stop, which returns ctx's error if
// ctx ends before the requests in flight do; force closes what is left.
// Without a deadline, the tasks are cut when ctx is cancelled, and the
// server forced at once.
//
// It returns nil if every request and task ended before the cut. Else its
// error says what was cut or forced, and wraps ctx's error; and stop's or
// force's error, if any.
func Stop(ctx context.Context, s *cpusched.Scheduler, stop func(context.Context) error, force func() error) error {
	cutCtx := ctx
	if deadline, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		cutCtx, cancel = context.WithDeadline(ctx, CutAt(time.Now(), deadline))
		defer cancel()
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop(ctx) }()
	var errs []error
	if err := s.Close(cutCtx); err != nil {
		errs = append(errs, fmt.Errorf("the scheduler's tasks in flight were cut: %w", err))
	}
	if err := <-stopped; err != nil {
		if ctx.Err() == nil || !errors.Is(err, ctx.Err()) {
			errs = append(errs, err) // the stop's own failure, such as a listener's
		} else {
			errs = append(errs, fmt.Errorf("the connections still active at the deadline were closed: %w", err))
			if err := force(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		// Wait for the cut tasks' release, if ctx has time left.
		if err := s.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("the scheduler's tasks had not all ended at the deadline: %w", err))
		}
	}
	return errors.Join(errs...)
}
