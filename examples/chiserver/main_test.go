package main

import (
	"crypto/sha256"
	"crypto/sha512"
	"fmt"
	"net/http"
	"testing"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched/httpsched"
	"github.com/cpusched/cpusched/internal/schedtest"
	"github.com/cpusched/cpusched/internal/servetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	sha256Chain, sha512Chain := sha256.Sum256(nil), sha512.Sum512(nil)
	for range 3 {
		sha256Chain, sha512Chain = sha256.Sum256(sha256Chain[:]), sha512.Sum512(sha512Chain[:])
	}
	base, stop := servetest.Start(t, run, "-drain", "5s")
	tests := []struct {
		path     string
		wantCode int
		wantBody string
	}{
		{"/hello", http.StatusOK, "hello\n"},
		{"/hash/sha256?n=3", http.StatusOK, fmt.Sprintf("%x\n", sha256Chain)},
		{"/hash/sha512?n=3", http.StatusOK, fmt.Sprintf("%x\n", sha512Chain)},
		{"/hash/sha256?n=0", http.StatusBadRequest, "n: must be an integer in 1..10000000, got \"0\"\n"},
		{"/nope", http.StatusNotFound, "404 page not found\n"},
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

func TestOneHandlerPerRoute(t *testing.T) {
	// r.Group builds the chain of each route once: each of the two hash
	// routes has its own WithMaxQueueWait limit, learned from its own
	// requests. With the slot held, a burst to one is shed beyond its
	// limit, and the other still gets its own places.
	s := schedtest.NewScheduler(t)
	r := router(s)
	shed, n503 := schedtest.ShedBurst(t, s, 40,
		func() int { return servetest.Record(r, "GET", "/hash/sha256?n=1").Code },
		func() int { return servetest.Record(r, "GET", "/hash/sha512?n=1").Code })
	if shed == 0 || n503 != shed || int(httpsched.Sheds(s).WaitLimit) != shed {
		t.Errorf("got %d of 40 requests shed at once, %d 503s, Sheds().WaitLimit %d; want some shed, each a 503 counted in WaitLimit",
			shed, n503, httpsched.Sheds(s).WaitLimit)
	}
}
