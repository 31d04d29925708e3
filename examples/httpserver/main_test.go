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
	}{
		{"/hello", http.StatusOK, "hello\n"},
		{"/hash?n=3", http.StatusOK, hashChain(3)},
		{"/hash", http.StatusOK, hashChain(defaultRounds)},
		{"/hash?n=0", http.StatusBadRequest, "n: must be an integer in 1..10000000, got \"0\"\n"},
		{"/nope", http.StatusNotFound, "404 page not found\n"},
	}
	for _, tt := range tests {
		resp, err := client.Get(base + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != tt.wantCode || string(body) != tt.wantBody {
			t.Errorf("%s: got %d %q (%v), want %d %q", tt.path, resp.StatusCode, body, err, tt.wantCode, tt.wantBody)
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
