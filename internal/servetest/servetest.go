// Package servetest holds the helpers of the tests of HTTP servers and
// handlers built on httpsched: the example servers, each a run(ctx, args,
// stdout) that serves until ctx ends and prints the address it listens on
// first, and the framework adapters' handlers, served with a recorder.
package servetest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Start runs run with args and "-addr 127.0.0.1:0" on a goroutine of its
// own, and returns the server's base URL ("http://127.0.0.1:PORT", from
// the line "listening on http://..." that run prints first) and stop,
// which cancels run's context and returns run's error. The test fails
// if run prints no such line; stop is called at its end too.
func Start(t testing.TB, run func(ctx context.Context, args []string, stdout io.Writer) error, args ...string) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), stdout)
		stdout.Close()
	}()
	var err error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	lines := bufio.NewReader(out)
	line, readErr := lines.ReadString('\n')
	go io.Copy(io.Discard, lines) // the rest, until run returns
	base, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "listening on ")
	if readErr != nil || !ok || strings.HasSuffix(base, ":0") {
		t.Fatalf("got %q (%v; run: %v), want \"listening on http://127.0.0.1:PORT\"", line, readErr, stop())
	}
	return base, stop
}

// Get sends a GET to url on a client of its own, and returns the status
// and body of the answer. The test fails if there is none.
func Get(t testing.TB, url string) (code int, body string) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// Record serves one request, method and path with no body, through h
// with a recorder, and returns it.
func Record(h http.Handler, method, path string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

// Check reports an answer that is not code with body (less the spaces
// around it), and a 503 without httpsched's default Retry-After, "1".
func Check(t testing.TB, what string, rec *httptest.ResponseRecorder, code int, body string) {
	t.Helper()
	if rec.Code != code || strings.TrimSpace(rec.Body.String()) != body {
		t.Errorf("%s: got %d %q, want %d %q", what, rec.Code, rec.Body, code, body)
	}
	if code == http.StatusServiceUnavailable && rec.Header().Get("Retry-After") != "1" {
		t.Errorf("%s: got Retry-After %q, want \"1\"", what, rec.Header().Get("Retry-After"))
	}
}
