package grpcsched

// GracefulStop: a gRPC server and its Scheduler stopped by one deadline.

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/drain"
)

// GracefulStop stops srv gracefully and closes s, by ctx's deadline, as
// httpsched.Shutdown does an http.Server: it calls srv.GracefulStop and,
// at the same time, s.Close with a context that ends a second before
// ctx's (half-way, with less than two seconds left; httpsched.ShutdownGrace):
//   - srv takes no new calls; s refuses new tasks at once, so a scheduled
//     call that arrives now (on a connection still open) is answered
//     codes.Unavailable with the pushback trailer.
//   - The calls in flight, queued or running, go on. If they all end
//     before the cut, GracefulStop returns as soon as srv's does.
//   - At the cut, the calls still queued are answered codes.Unavailable,
//     and the running ones see their task's context cancelled and
//     Checkpoint return cpusched.ErrClosed: a handler that returns that
//     error (or the context's) is answered codes.Unavailable with the
//     pushback trailer too (UnaryServerInterceptor says how), which a
//     client's retry policy retries on another replica.
//   - If ctx ends before srv.GracefulStop returns (a handler ignored the
//     cut, or a stream its client keeps open, such as a health Watch),
//     GracefulStop calls srv.Stop, which closes the connections left, and
//     returns. srv.GracefulStop itself returns, on a goroutine of its own,
//     once the handlers that ignored the cut have returned.
//
// So the whole takes at most ctx's deadline. Give ctx one: without it,
// GracefulStop waits for every call until ctx is cancelled, then cuts
// and stops at once.
//
// It returns nil if every call and task ended before the cut. Else its
// error says what was cut or stopped, and wraps ctx's error
// (context.DeadlineExceeded). s is closed either way. Call it beside
// httpsched.Shutdown for an HTTP server on the same s: each calls
// s.Close, and the first cut applies to both.
func GracefulStop(ctx context.Context, srv *grpc.Server, s *cpusched.Scheduler) error {
	stop := func(ctx context.Context) error {
		stopped := make(chan struct{})
		go func() {
			srv.GracefulStop()
			close(stopped)
		}()
		select {
		case <-stopped:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	force := func() error {
		srv.Stop()
		return nil
	}
	if err := drain.Stop(ctx, s, stop, force); err != nil {
		return fmt.Errorf("grpcsched: GracefulStop: %w", err)
	}
	return nil
}
