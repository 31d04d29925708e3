// Httpserver is a small HTTP server whose CPU-heavy route runs through
// cpusched, so that its fast routes stay fast while the heavy one is busy:
// /hash waits for a worker slot and yields at every Checkpoint, /hello and
// /sleep do not wait for one at all.
//
//	go run ./examples/httpserver [-addr 127.0.0.1:8080] [-garbage BYTES]
//	curl http://127.0.0.1:8080/hello
//	curl 'http://127.0.0.1:8080/sleep?d=500us'
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
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/httpsched"
)

// Limits of /hash's n, as its 400 quotes them.
const (
	defaultRounds = 100_000
	maxRounds     = 10_000_000
)

// maxGarbage bounds -garbage.
const maxGarbage = 4 << 20

// Limits of /sleep's d, as its 400 quotes them.
const (
	defaultSleep = 500 * time.Microsecond
	maxSleep     = time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "httpserver:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("httpserver", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free one)")
	garbage := fs.Int("garbage", 0, fmt.Sprintf("bytes of response buffer each fast request builds, and /hash 8 KiB every 4096 rounds, as a server that allocates (0..%d)", maxGarbage))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *garbage < 0 || *garbage > maxGarbage {
		return fmt.Errorf("-garbage must be in 0..%d bytes, got %d", maxGarbage, *garbage)
	}
	a := allocator(*garbage)

	sched, err := cpusched.New() // ospriority on Linux, reserve elsewhere
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello", func(w http.ResponseWriter, r *http.Request) {
		a.response()
		io.WriteString(w, "hello\n")
	})
	mux.HandleFunc("GET /sleep", a.sleep)
	// Shed /hash with 503 rather than let a request wait over 500ms for a slot.
	mux.Handle("GET /hash", httpsched.Handler(sched, http.HandlerFunc(a.hash),
		httpsched.WithMaxQueueWait(500*time.Millisecond)))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		sched.Close(context.Background())
		return err
	}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case err = <-served:
		return errors.Join(err, sched.Close(context.Background()))
	case <-ctx.Done():
	}
	// Up to 5s for the requests in flight; those still queued or running
	// at 4s are answered 503 (httpsched.Shutdown says how).
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = httpsched.Shutdown(shutdownCtx, srv, sched)
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	return err
}

// hash answers the hex SHA-256 hash chain of n rounds (default 100,000)
// from the empty input. It runs as a cpusched task, with a Checkpoint
// every round: when the task's slice is over, another request gets the slot.
func (a allocator) hash(w http.ResponseWriter, r *http.Request) {
	n, ok := param(w, r, "n", defaultRounds, fmt.Sprintf("an integer in 1..%d", maxRounds), func(s string) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 1 && n <= maxRounds
	})
	if !ok {
		return
	}
	task := httpsched.TaskFrom(r.Context())
	sum := sha256.Sum256(nil)
	for i := range n {
		sum = sha256.Sum256(sum[:])
		if a > 0 && i%hashGarbageEvery == 0 {
			a.buffer(8 << 10)
		}
		if err := task.Checkpoint(); err != nil { // the client is gone, or the server stops
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	fmt.Fprintf(w, "%x\n", sum)
}

// sleep answers after d (default 500us), like a handler waiting on a
// database: a closed-loop client on it keeps the server busy with many
// short requests (bench.sh's floor comparison).
func (a allocator) sleep(w http.ResponseWriter, r *http.Request) {
	d, ok := param(w, r, "d", defaultSleep, fmt.Sprintf("a duration in 0s..%v, e.g. 500us", maxSleep), func(s string) (time.Duration, bool) {
		d, err := time.ParseDuration(s)
		return d, err == nil && d >= 0 && d <= maxSleep
	})
	if !ok {
		return
	}
	select {
	case <-time.After(d):
		a.response()
		fmt.Fprintf(w, "slept %v\n", d)
	case <-r.Context().Done(): // the client is gone
	}
}

// param returns r's query parameter name as parse reads it, or def when the
// query has none. When parse rejects it, param answers 400 with what the
// parameter must be (want) and returns ok false.
func param[T any](w http.ResponseWriter, r *http.Request, name string, def T, want string, parse func(string) (T, bool)) (v T, ok bool) {
	q := r.URL.Query()
	if !q.Has(name) {
		return def, true
	}
	if v, ok = parse(q.Get(name)); !ok {
		http.Error(w, fmt.Sprintf("%s: must be %s, got %q", name, want, q.Get(name)), http.StatusBadRequest)
	}
	return v, ok
}

// hashGarbageEvery is how many /hash rounds pass between its 8 KiB
// allocations with -garbage: about 0.6 ms of SHA-256 (a round hashes 32
// bytes), the rate of a CRC32 task that allocates 8 KiB every 64 passes
// over 128 KiB, as the bench's. Every 64 rounds, as at first, allocated
// seventy times that, several hundred MB a second from /hash alone.
const hashGarbageEvery = 4096

// allocator is -garbage: the bytes of response buffer each fast request
// builds (0: none), so that the collector runs as in a server that
// allocates.
type allocator int

// sink keeps the last buffer reachable, so that the compiler cannot drop
// the allocation.
var sink atomic.Pointer[[]byte]

// response builds a fast request's response buffer.
func (a allocator) response() {
	if a > 0 {
		a.buffer(int(a))
	}
}

// buffer allocates n bytes and writes every page of them.
func (a allocator) buffer(n int) {
	b := make([]byte, n)
	for i := 0; i < n; i += 4096 {
		b[i] = byte(i)
	}
	sink.Store(&b)
}
