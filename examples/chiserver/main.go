// Chiserver is a chi server whose CPU-heavy routes run through cpusched
// with httpsched as it is: chi's middleware is func(http.Handler)
// http.Handler, and r.With and r.Group build it once per route, so each
// route gets an httpsched handler of its own, and its WithMaxQueueWait
// limit. It drains on SIGTERM with httpsched.Shutdown.
//
//	go run ./examples/chiserver [-addr 127.0.0.1:8080] [-drain 10s]
//	curl http://127.0.0.1:8080/hello
//	curl 'http://127.0.0.1:8080/hash/sha256?n=1000000'
package main

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// maxRounds bounds the hash routes' n, as their 400 says.
const maxRounds = 10_000_000

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chiserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then drains for at most -drain.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("chiserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free one)")
	drain := fs.Duration("drain", 10*time.Second, "how long the requests in flight may take to finish at SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := cpusched.New()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		s.Close(context.Background())
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: router(s), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err = <-served:
		return errors.Join(err, s.Close(context.Background()))
	case <-ctx.Done():
	}
	drainCtx, cancel := context.WithTimeout(context.Background(), *drain)
	defer cancel()
	err = httpsched.Shutdown(drainCtx, srv, s)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// router returns the server's routes: /hello as it is, the hash routes
// through s.
func router(s *cpusched.Scheduler) http.Handler {
	// chi middleware. Give it with r.With or in r.Group, which build the
	// chain once per route; a r.Use on the top router would build one
	// handler for every route, before the route is known.
	scheduled := func(next http.Handler) http.Handler {
		return httpsched.Handler(s, next, httpsched.WithMaxQueueWait(500*time.Millisecond))
	}
	r := chi.NewRouter()
	r.Get("/hello", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello\n") })
	r.Group(func(r chi.Router) {
		r.Use(scheduled)
		r.Get("/hash/sha256", hash(func(b []byte) []byte { sum := sha256.Sum256(b); return sum[:] }))
		r.Get("/hash/sha512", hash(func(b []byte) []byte { sum := sha512.Sum512(b); return sum[:] }))
	})
	return r
}

// hash returns a handler that answers the hex hash chain of n rounds
// (default 100,000) of sum from the empty input, with a Checkpoint every
// round.
func hash(sum func([]byte) []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := 100_000
		if q := r.URL.Query().Get("n"); q != "" {
			var err error
			if n, err = strconv.Atoi(q); err != nil || n < 1 || n > maxRounds {
				http.Error(w, fmt.Sprintf("n: must be an integer in 1..%d, got %q", maxRounds, q), http.StatusBadRequest)
				return
			}
		}
		task := httpsched.TaskFrom(r.Context())
		b := sum(nil)
		for range n {
			b = sum(b)
			if err := task.Checkpoint(); err != nil { // yields when its slice ends
				return // the client left, or the drain cut it: httpsched answers 503
			}
		}
		fmt.Fprintf(w, "%x\n", b)
	}
}
