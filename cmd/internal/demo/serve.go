package demo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/cpusched/cpusched"
)

// Serve's default address and timeouts.
const (
	// DefaultAddr is the address cpuworker's demo listens on.
	DefaultAddr = "127.0.0.1:8080"
	// ShutdownTimeout is how long Serve waits for requests in flight to end
	// once ctx ends, before it cancels them; the scheduler's Close then gets
	// as long again.
	ShutdownTimeout = 5 * time.Second
	// ReadHeaderTimeout bounds the time a client may take to send a
	// request's header.
	ReadHeaderTimeout = 10 * time.Second
)

// Listening describes a Server that has started to listen, for Serve's
// ready callback.
type Listening struct {
	Addr       string             // host:port actually bound (port 0 resolved)
	Isolation  cpusched.Isolation // the mode in effect
	Workers    int                // worker slots in effect
	GOMAXPROCS int
	// Raisable is cpusched.Stats.ThreadsRaisable: in IsolationOSPriority,
	// whether a lowered thread can be raised back here.
	Raisable bool
	// Auto is Config.Auto: the mux served through httpsched.Auto.
	Auto bool
}

// String returns the fixed, machine-readable form
//
//	listening on http://127.0.0.1:PORT (isolation=reserve workers=1 gomaxprocs=2)
//
// that `cpusched serve` prints after "cpusched serve: " and that programs
// starting it parse to find the port. In IsolationOSPriority, where it
// matters, " raisable=true" or " raisable=false" follows gomaxprocs; with
// Auto, " auto=true" ends the list.
func (l Listening) String() string {
	more := ""
	if l.Isolation == cpusched.IsolationOSPriority {
		more = fmt.Sprintf(" raisable=%t", l.Raisable)
	}
	if l.Auto {
		more += " auto=true"
	}
	return fmt.Sprintf("listening on http://%s (isolation=%s workers=%d gomaxprocs=%d%s)",
		l.Addr, l.Isolation, l.Workers, l.GOMAXPROCS, more)
}

// Serve builds a Server from cfg, listens on addr (port 0 picks a free
// port), calls ready (if not nil) once the socket accepts connections, and
// serves until ctx ends. Then it shuts down gracefully: it stops accepting,
// waits up to ShutdownTimeout for the requests in flight, cancels the
// contexts of those still running (their tasks stop at their next
// Checkpoint) and closes their connections, and closes the scheduler.
//
// It returns nil after a graceful shutdown, an error if the server could not
// start or failed, and an error saying so if connections had to be closed.
// (As http.Server.Shutdown, it waits for a connection that was opened but has
// sent no request for up to 5 s, so such a client also causes that error.)
func Serve(ctx context.Context, addr string, cfg Config, ready func(Listening)) error {
	s, err := NewServer(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.Close(context.Background()) // no task has run: returns at once
		return fmt.Errorf("demo: %w", err)
	}
	return s.serve(ctx, ln, ready, ShutdownTimeout)
}

// serve serves on ln until ctx ends, then shuts down as Serve says, with
// grace in place of ShutdownTimeout.
func (s *Server) serve(ctx context.Context, ln net.Listener, ready func(Listening), grace time.Duration) error {
	// Requests' contexts derive from base, so that cancelling it stops the
	// handlers that outlive the graceful period (Shutdown does not cancel
	// them).
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: ReadHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()

	if ready != nil {
		st := s.sched.Stats()
		ready(Listening{Addr: ln.Addr().String(), Isolation: st.Isolation, Workers: st.Workers, GOMAXPROCS: gomaxprocs(), Raisable: st.ThreadsRaisable, Auto: s.cfg.Auto})
	}

	var errs []error
	select {
	case err := <-served: // Serve failed on its own (it never returns nil)
		errs = append(errs, fmt.Errorf("demo: %w", err))
		cancelBase()
		hs.Close()
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), grace)
		err := hs.Shutdown(sctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("demo: connections still open after %v were closed, their requests cancelled", grace))
			cancelBase()
			hs.Close()
		}
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("demo: %w", err))
		}
	}

	cctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := s.Close(cctx); err != nil {
		errs = append(errs, fmt.Errorf("demo: closing the scheduler: %w", err))
	}
	return errors.Join(errs...)
}
