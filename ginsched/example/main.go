// Example is a gin server whose CPU-heavy route runs through cpusched,
// so that its fast route stays fast while the heavy one is busy, and that
// drains on SIGTERM: the requests in flight finish, those still waiting
// a second before the deadline are answered 503.
//
//	go run ./ginsched/example [-addr 127.0.0.1:8080] [-drain 10s]
//	curl http://127.0.0.1:8080/hello
//	curl 'http://127.0.0.1:8080/hash?n=1000000'
package main

import (
	"context"
	"crypto/sha256"
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

	"github.com/gin-gonic/gin"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/ginsched"
	"github.com/cpusched/cpusched/httpsched"
)

// maxRounds bounds /hash's n, as its 400 says.
const maxRounds = 10_000_000

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then drains for at most -drain.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("example", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free one)")
	drain := fs.Duration("drain", 10*time.Second, "how long the requests in flight may take to finish at SIGTERM")
	if err := fs.Parse(args); err != nil {
		return err
	}
	s, err := cpusched.New()
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	r.GET("/hello", func(c *gin.Context) { c.String(http.StatusOK, "hello\n") })
	// One middleware value per route or group: it keeps each route's
	// WithMaxQueueWait limit for as long as it lives.
	r.GET("/hash", ginsched.Middleware(s, httpsched.WithMaxQueueWait(500*time.Millisecond)), hash)

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		s.Close(context.Background())
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
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

// hash answers the hex SHA-256 hash chain of n rounds (default 100,000)
// from the empty input, with a Checkpoint every round.
func hash(c *gin.Context) {
	n := 100_000
	if q, ok := c.GetQuery("n"); ok {
		var err error
		if n, err = strconv.Atoi(q); err != nil || n < 1 || n > maxRounds {
			c.String(http.StatusBadRequest, "n: must be an integer in 1..%d, got %q\n", maxRounds, q)
			return
		}
	}
	task := ginsched.TaskFrom(c)
	sum := sha256.Sum256(nil)
	for range n {
		sum = sha256.Sum256(sum[:])
		if err := task.Checkpoint(); err != nil { // yields when its slice ends
			c.Error(err) // the client left, or the drain cut it: 503
			return
		}
	}
	c.String(http.StatusOK, "%x\n", sum)
}
