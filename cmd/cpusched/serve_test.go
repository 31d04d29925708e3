package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestServeUsageErrors(t *testing.T) {
	verifyNoLeaks(t)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"unknown flag", []string{"-bogus"}, "flag provided but not defined"},
		{"argument", []string{"extra"}, "takes no arguments"},
		{"bad isolation", []string{"-isolation", "bogus"}, `-isolation: cpusched: unknown isolation mode "bogus"`},
		{"workers negative", []string{"-workers", "-1"}, "-workers -1: cpusched: WithWorkers(-1): workers must be in 1..1024 (or 0 for the mode's default)"},
		{"workers too many", []string{"-workers", "1025"}, "-workers 1025: cpusched: WithWorkers(1025): workers must be in 1..1024"},
		{"workers not a number", []string{"-workers", "x"}, `invalid value "x" for flag -workers`},
		{"slice too short", []string{"-slice", "1us"}, "-slice 1µs: cpusched: WithSlice(1µs): slice must be in 50µs..100ms"},
		{"slice too long", []string{"-slice", "1s"}, "-slice 1s: cpusched: WithSlice(1s): slice must be in 50µs..100ms"},
		{"gc with value", []string{"-gc=maybe"}, "invalid boolean value"},
		{"garbage negative", []string{"-garbage", "-1"}, "-garbage must be in 0..4194304 bytes (0: no garbage), got -1"},
		{"garbage too big", []string{"-garbage", "4194305"}, "-garbage must be in 0..4194304 bytes (0: no garbage), got 4194305"},
		{"garbage not a number", []string{"-garbage", "32KiB"}, `invalid value "32KiB" for flag -garbage`},
		{"gc and garbage", []string{"-gc", "-garbage", "0"}, "-gc is -garbage 262144: give one of them, not both"},
		{"groups weight out of range", []string{"-groups", "a=300,b=0"}, `-groups: group "b": the weight must be in 1..10000, got 0`},
		{"groups without weight", []string{"-groups", "a"}, `-groups: "a": want NAME=WEIGHT`},
		// FuzzServeArgs found these exiting 1 with net.Listen's error, which
		// did not name the flag.
		{"addr without port", []string{"-addr", "localhost"}, `-addr must be host:port (port 0 picks a free port), got "localhost"`},
		{"addr port negative", []string{"-addr", "127.0.0.1:-1"}, `-addr: the port must be 0..65535 or a service name, got "-1"`},
		{"addr port too big", []string{"-addr", "127.0.0.1:65536"}, `got "65536"`},
		{"addr unknown service", []string{"-addr", "127.0.0.1:nosuchservice"}, `got "nosuchservice"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkUsageError(t, append([]string{"serve"}, tt.args...), tt.wantErr)
		})
	}
}

func TestServeListenFailure(t *testing.T) {
	verifyNoLeaks(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), []string{"serve", "-addr", taken.Addr().String()}, &stdout, &stderr)
	if code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "address already in use") {
		t.Errorf("got exit status %d, stdout %q, stderr %q; want 1, nothing and the listen error", code, stdout.String(), stderr.String())
	}
}

// listeningLine is the line the benchmark parses.
var listeningLine = regexp.MustCompile(`^cpusched serve: listening on (http://127\.0\.0\.1:[1-9][0-9]*) \(isolation=(\S+) workers=([1-9][0-9]*) gomaxprocs=([1-9][0-9]*)( raisable=(true|false))?( auto=true)?\)$`)

func TestServeRunsUntilCancelled(t *testing.T) {
	t.Run("mux", func(t *testing.T) { testServeRuns(t, false) })
	t.Run("auto", func(t *testing.T) { testServeRuns(t, true) })
}

// testServeRuns runs serve, with -auto or without, until cancelled.
// autoDelayRoute matches /stats' entry for /delay1ms among Auto's routes.
var autoDelayRoute = regexp.MustCompile(`"route":\s*"GET /delay1ms"`)

func testServeRuns(t *testing.T, auto bool) {
	verifyNoLeaks(t)
	args := []string{"serve", "-addr", "127.0.0.1:0", "-isolation", "none", "-workers", "2", "-gc"}
	if auto {
		args = append(args, "-auto")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stdout := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := dispatch(ctx, args, stdout, &stderr)
		stdout.Close()
		done <- code
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listening line: %v (stderr %q)", err, stderr.String())
	}
	m := listeningLine.FindStringSubmatch(strings.TrimSuffix(line, "\n"))
	if m == nil || m[2] != "none" || m[3] != "2" || (m[7] != "") != auto {
		t.Fatalf("got %q, want a line matching %v with isolation=none workers=2, auto=true only with -auto", line, listeningLine)
	}
	for _, path := range []string{"/delay1ms", "/checksumWithCpuWorker?n=2", "/stats"} {
		resp, err := http.Get(m[1] + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: got %d, want 200", path, resp.StatusCode)
		}
		// With -auto the server is served whole by httpsched.Auto: /stats
		// lists the routes it tracks, those just served among them.
		if path == "/stats" && autoDelayRoute.Match(body) != auto {
			t.Errorf("GET /stats with -auto %v: got %s, want GET /delay1ms among auto_routes only with -auto", auto, body)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("got exit status %d, want 0 (stderr %q)", code, stderr.String())
	}
	if rest, _ := io.ReadAll(out); len(rest) != 0 {
		t.Errorf("got more stdout %q, want only the listening line", rest)
	}
}
