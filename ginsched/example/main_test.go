package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/internal/leakcheck"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

// hashChain is the answer /hash?n=n should give.
func hashChain(n int) string {
	sum := sha256.Sum256(nil)
	for range n {
		sum = sha256.Sum256(sum[:])
	}
	return fmt.Sprintf("%x\n", sum)
}

func TestRun(t *testing.T) {
	base, stop := servetest.Start(t, run, "-drain", "5s")
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/hello", http.StatusOK, "hello\n"},
		{"/hash?n=3", http.StatusOK, hashChain(3)},
		{"/hash", http.StatusOK, hashChain(100_000)},
		{"/hash?n=0", http.StatusBadRequest, "n: must be an integer in 1..10000000, got \"0\"\n"},
		{"/nope", http.StatusNotFound, "404 page not found"},
	}
	for _, tt := range tests {
		if code, body := servetest.Get(t, base+tt.path); code != tt.wantCode || body != tt.wantBody {
			t.Errorf("%s: got %d %q, want %d %q", tt.path, code, body, tt.wantCode, tt.wantBody)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("run: got %v, want nil after a drain with nothing in flight", err)
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
		if err := run(t.Context(), tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("run(%q): got %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}
