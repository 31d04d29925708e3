package hogproc

import (
	"context"
	"flag"
	"io"
	"reflect"
	"testing"
	"time"
)

// TestJobsArgsRoundTrip: the flags Args writes give the child the same
// jobs.
func TestJobsArgsRoundTrip(t *testing.T) {
	for _, j := range []Jobs{
		DefaultJobs(),
		{MinPasses: 100, MaxPasses: 200, CallPct: 50, MinCallPasses: 5000, MaxCallPasses: 10000, Pause: 200 * time.Millisecond},
		{MinPasses: 1, MaxPasses: 1, CallPct: 100, MinCallPasses: 7, MaxCallPasses: 9},
	} {
		if err := j.Validate(); err != nil {
			t.Fatalf("%+v: %v", j, err)
		}
		got := DefaultJobs()
		fs := flag.NewFlagSet("test", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		got.addFlags(fs)
		if err := fs.Parse(j.Args()); err != nil {
			t.Fatalf("parsing %q: %v", j.Args(), err)
		}
		if !reflect.DeepEqual(got, j) {
			t.Errorf("Args %q: got %+v, want %+v", j.Args(), got, j)
		}
	}
}

// TestJobsNext: every job's passes are in its kind's range, and both kinds
// come up when half are calls.
func TestJobsNext(t *testing.T) {
	j := Jobs{MinPasses: 10, MaxPasses: 20, CallPct: 50, MinCallPasses: 1000, MaxCallPasses: 2000}
	short, calls := 0, 0
	for range 1000 {
		switch n := j.next(); {
		case n >= 10 && n <= 20:
			short++
		case n >= 1000 && n <= 2000:
			calls++
		default:
			t.Fatalf("got a job of %d passes, want 10..20 or 1000..2000", n)
		}
	}
	if short < 350 || calls < 350 {
		t.Errorf("got %d jobs and %d calls of 1000, want about half each", short, calls)
	}
}

// TestJobsRestEndsWithContext: a rest ends when the context does.
func TestJobsRestEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	Jobs{Pause: MaxPause}.rest(ctx)
	if d := time.Since(start); d > time.Second {
		t.Errorf("rest took %v after its context ended, want at once", d)
	}
}
