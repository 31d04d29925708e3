package httpsched

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/internal/drain"
	"github.com/cpusched/cpusched/internal/schedtest"
)

// shutdownSlack is how much later than its deadline Shutdown may return:
// the force and the test's own scheduling, under -race on a shared
// machine.
const shutdownSlack = 300 * time.Millisecond

// serveLoopback serves h on a loopback port until the test ends, and
// returns the server and its URL.
func serveLoopback(t *testing.T, h http.Handler) (*http.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: got %v, want http.ErrServerClosed", err)
		}
	})
	return srv, "http://" + ln.Addr().String()
}

// shutdown runs Shutdown with a context of deadline, and returns how long
// it took and its error.
func shutdown(srv *http.Server, s *cpusched.Scheduler, deadline time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	err := Shutdown(ctx, srv, s)
	return time.Since(start), err
}

// answer is what a client got.
type answer struct {
	code       int
	retryAfter string
	body       string
	err        error
}

// getAsync sends a GET to url on a client of its own and returns where
// its answer will arrive.
func getAsync(t *testing.T, url string) <-chan answer {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Get(url)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body), err}
	}()
	return got
}

func TestShutdownLetsARequestInFlightFinish(t *testing.T) {
	s := schedtest.NewScheduler(t)
	entered := make(chan struct{})
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		task := TaskFrom(r.Context())
		for start := time.Now(); time.Since(start) < 200*time.Millisecond; {
			if err := task.Checkpoint(); err != nil {
				return
			}
		}
		io.WriteString(w, "done")
	}))
	srv, url := serveLoopback(t, h)
	got := getAsync(t, url)
	<-entered

	const deadline = 5 * time.Second
	took, err := shutdown(srv, s, deadline)
	if err != nil {
		t.Errorf("Shutdown: got %v, want nil", err)
	}
	if a := <-got; a.err != nil || a.code != http.StatusOK || a.body != "done" {
		t.Errorf("got %d %q (%v), want 200 \"done\"", a.code, a.body, a.err)
	}
	// The request ends 200 ms in; Shutdown's look at the connections
	// comes every 500 ms at most after that.
	if took > deadline-drain.Grace {
		t.Errorf("Shutdown took %v, want it back once the request ended, well before the cut at %v", took, deadline-drain.Grace)
	}
}

func TestShutdownAnswers503ToTheRequestsItCuts(t *testing.T) {
	// One slot: the first request holds it, computing until its task's
	// context ends (no Checkpoint), and the second waits in the queue. At
	// the cut both answer 503 with Retry-After, over their connections:
	// a trial service had its clients' connections reset.
	s := schedtest.NewScheduler(t)
	entered := make(chan struct{}, 1)
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		for r.Context().Err() == nil {
		}
	}), WithRetryAfter(2*time.Second))
	srv, url := serveLoopback(t, h)
	running := getAsync(t, url)
	<-entered
	queued := getAsync(t, url)
	schedtest.WaitQueued(t, s, 1)

	const deadline = time.Second
	took, err := shutdown(srv, s, deadline)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: got %v, want an error that wraps context.DeadlineExceeded (tasks were cut)", err)
	}
	for name, got := range map[string]<-chan answer{"running": running, "queued": queued} {
		if a := <-got; a.err != nil || a.code != http.StatusServiceUnavailable || a.retryAfter != "2" {
			t.Errorf("%s: got %d Retry-After %q (%v), want 503 Retry-After \"2\"", name, a.code, a.retryAfter, a.err)
		}
	}
	if took > deadline+shutdownSlack {
		t.Errorf("Shutdown took %v, want at most its deadline, %v", took, deadline)
	}
	if cut := drain.CutAt(time.Time{}, time.Time{}.Add(deadline)).Sub(time.Time{}); took < cut {
		t.Errorf("Shutdown took %v, want the requests given until the cut, %v in", took, cut)
	}
	st := s.Stats()
	if st.Canceled != 2 || Sheds(s).Closed != 1 {
		t.Errorf("got Stats().Canceled %d, Sheds().Closed %d, want 2 and 1 (the queued one)", st.Canceled, Sheds(s).Closed)
	}
}

func TestShutdownClosesAHandlerThatIgnoresTheCut(t *testing.T) {
	// A handler that never looks at its context outlives the cut: at the
	// deadline Shutdown closes its connection and returns.
	s := schedtest.NewScheduler(t, cpusched.WithWorkers(2))
	entered, release := make(chan struct{}), make(chan struct{})
	h := Handler(s, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	}))
	srv, url := serveLoopback(t, h)
	got := getAsync(t, url)
	<-entered

	const deadline = 500 * time.Millisecond
	took, err := shutdown(srv, s, deadline)
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Shutdown: got %v, want an error that wraps context.DeadlineExceeded", err)
	}
	if took > deadline+shutdownSlack {
		t.Errorf("Shutdown took %v, want at most its deadline, %v", took, deadline)
	}
	if a := <-got; a.err == nil {
		t.Errorf("got %d %q, want the connection closed", a.code, a.body)
	}
}
