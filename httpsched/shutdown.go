package httpsched

// Shutdown: a server and its Scheduler stopped by one deadline.

import (
	"context"
	"fmt"
	"net/http"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/drain"
)

// ShutdownGrace is how long before ctx's deadline Shutdown cuts the
// tasks still queued or running: time for their 503s to reach the clients
// and for srv.Shutdown, which looks at its connections every 500 ms at
// most, to see them end. With less than twice that left, Shutdown cuts
// half-way.
const ShutdownGrace = drain.Grace

// Shutdown shuts srv down gracefully and closes s, by ctx's deadline, so
// that the requests in flight finish while there is time and those cut
// are answered rather than reset. It calls srv.Shutdown(ctx) and, at the
// same time, s.Close with a context that ends ShutdownGrace before ctx's:
//   - srv takes no new connections; s refuses new tasks at once, so a
//     request to a route of s that arrives now (on a connection still
//     open) is answered 503 with Retry-After.
//   - The requests in flight, queued or running, go on. If they all end
//     before the cut, Shutdown returns as soon as srv.Shutdown does.
//   - At the cut, the requests still queued are answered 503 with
//     Retry-After, and the running ones see their task's context cancelled
//     and Checkpoint return cpusched.ErrClosed: a handler that then
//     returns without writing is answered 503 with Retry-After too
//     (Handler says how). Each connection closes after its answer.
//   - If ctx ends before srv.Shutdown is done (a handler ignored the cut:
//     no Checkpoint, no look at its context), Shutdown calls srv.Close,
//     which closes the connections left, and returns.
//
// So the whole takes at most ctx's deadline. Give ctx one: without it,
// Shutdown waits for every request until ctx is cancelled, then cuts and
// closes at once, as srv.Shutdown and s.Close do.
//
// It returns nil if every request and task ended before the cut and srv
// shut down. Else its error says what was cut or closed, and wraps ctx's
// error (context.DeadlineExceeded) and srv's, if any. s is closed either
// way; a task that ignored the cut keeps running until it returns, and
// s releases its workers then (Close says what that means).
//
// Call Shutdown for each server of s (they may run at once: each calls
// s.Close, and the first cut applies to all), or grpcsched.GracefulStop
// for a gRPC server on the same s. srv may be any http.Server whose
// handlers run on s: echo's e.Server, one serving gin's engine.
func Shutdown(ctx context.Context, srv *http.Server, s *cpusched.Scheduler) error {
	if err := drain.Stop(ctx, s, srv.Shutdown, srv.Close); err != nil {
		return fmt.Errorf("httpsched: Shutdown: %w", err)
	}
	return nil
}
