package schedtest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
)

// kindCall is how long KindRig's calls run without a Checkpoint.
const kindCall = 30 * time.Millisecond

// KindRig checks that an adapter gives the tasks of two of its routes (or
// methods) kinds of their own (cpusched.WithKind), on a scheduler of one
// slot (NewScheduler's). The adapter's handler calls Work on each
// request's task: a call runs 30 ms without a Checkpoint, as one that
// cannot yield; a small request notes how long it waited for the slot.
// Check drives three clients of calls in a closed loop and, once the
// calls' estimate has settled, small requests one by one at different
// points of a call.
//
// With a kind of their own, the scheduler takes the small requests for
// small and serves them from the lane as soon as the running call ends:
// each waits at most the rest of one call. Of the calls' kind, they are
// placed as calls and often wait behind the calls that wait too. Check
// fails if the longest of 15 waits is over 1.5 of the calls' median run
// time, measured in the same run: ten runs each way, through grpcsched,
// read 23-24 ms with kinds and 48-115 ms with one kind.
type KindRig struct {
	mu          sync.Mutex
	runs, waits []time.Duration
}

// Work is the handler's body for a request of task: a call, or a small
// request.
func (r *KindRig) Work(task *cpusched.Task, call bool) {
	if !call {
		r.mu.Lock()
		r.waits = append(r.waits, task.Waited())
		r.mu.Unlock()
		return
	}
	start := time.Now()
	for time.Since(start) < kindCall { // no Checkpoint: a call that cannot yield
	}
	r.mu.Lock()
	r.runs = append(r.runs, time.Since(start))
	r.mu.Unlock()
}

// Check runs the load through serve, which serves one request of the
// adapter, with ctx, on the calls' route or on the small requests'.
func (r *KindRig) Check(t *testing.T, serve func(ctx context.Context, call bool)) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for ctx.Err() == nil {
				serve(ctx, true)
			}
		})
	}
	time.Sleep(10 * kindCall) // the calls' estimate settles (a window of 100 ms)
	for i := range 15 {
		serve(context.Background(), false)
		time.Sleep(time.Duration(i%4+1) * kindCall / 5) // at different points of a call
	}
	cancel()
	wg.Wait()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.runs) == 0 || len(r.waits) != 15 {
		t.Fatalf("%d calls and %d small requests reached the handler, want some and 15", len(r.runs), len(r.waits))
	}
	slices.Sort(r.runs)
	slices.Sort(r.waits)
	run, wait := r.runs[len(r.runs)/2], r.waits[len(r.waits)-1]
	t.Logf("calls' median run %v; the small requests' waits %v", run, r.waits)
	if wait > run*3/2 {
		t.Errorf("the small requests' waits %v: the longest %v is over 1.5 of the calls' median run %v, want under: placed behind them", r.waits, wait, run)
	}
}
