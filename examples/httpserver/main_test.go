package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hashChain is the answer /hash?n=n should give.
func hashChain(n int) string {
	sum := sha256.Sum256(nil)
	for range n {
		sum = sha256.Sum256(sum[:])
	}
	return fmt.Sprintf("%x\n", sum)
}

func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, stdout := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, stdout)
		stdout.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the listening line: %v (run: %v)", err, <-done)
	}
	base, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "listening on ")
	if !ok || strings.HasSuffix(base, ":0") {
		t.Fatalf("got %q, want \"listening on http://127.0.0.1:PORT\"", line)
	}

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	tests := []struct {
		path     string
		wantCode int
		wantBody string
		minTime  time.Duration // the least the answer may take
	}{
		{"/hello", http.StatusOK, "hello\n", 0},
		{"/hash?n=3", http.StatusOK, hashChain(3), 0},
		{"/hash", http.StatusOK, hashChain(defaultRounds), 0},
		{"/hash?n=0", http.StatusBadRequest, "n: must be an integer in 1..10000000, got \"0\"\n", 0},
		{"/sleep", http.StatusOK, "slept 500µs\n", 500 * time.Microsecond},
		{"/sleep?d=30ms", http.StatusOK, "slept 30ms\n", 30 * time.Millisecond},
		{"/sleep?d=0", http.StatusOK, "slept 0s\n", 0},
		{"/sleep?d=2s", http.StatusBadRequest, "d: must be a duration in 0s..1s, e.g. 500us, got \"2s\"\n", 0},
		{"/sleep?d=-1ms", http.StatusBadRequest, "d: must be a duration in 0s..1s, e.g. 500us, got \"-1ms\"\n", 0},
		{"/sleep?d=500", http.StatusBadRequest, "d: must be a duration in 0s..1s, e.g. 500us, got \"500\"\n", 0},
		{"/nope", http.StatusNotFound, "404 page not found\n", 0},
	}
	for _, tt := range tests {
		start := time.Now()
		resp, err := client.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.wantCode || string(body) != tt.wantBody {
			t.Errorf("%s: got %d %q (%v), want %d %q", tt.path, resp.StatusCode, body, err, tt.wantCode, tt.wantBody)
		}
		if took := time.Since(start); took < tt.minTime {
			t.Errorf("%s: answered in %v, want at least %v", tt.path, took, tt.minTime)
		}
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: got %v, want nil", err)
	}
}

func TestRunErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-addr", "127.0.0.1:-1"}, "invalid port"},
	}
	for _, tt := range tests {
		err := run(context.Background(), tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q): got %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

func TestGarbageFlag(t *testing.T) {
	for _, v := range []string{"-1", "4194305"} {
		err := run(context.Background(), []string{"-addr", "127.0.0.1:0", "-garbage", v}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-garbage must be in 0..4194304 bytes, got "+v) {
			t.Errorf("-garbage %s: got %v, want the range named", v, err)
		}
	}
	a := allocator(32 << 10)
	a.response()
	if b := sink.Load(); b == nil || len(*b) != 32<<10 {
		t.Errorf("a 32 KiB allocator left %v, want a 32 KiB buffer", b)
	}
}
