// What a measured window's loads give its row: latency summaries, and the
// scheduled small requests' own wait in the scheduler.

package bench

import (
	"strconv"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/load"
)

// latencyResult summarizes one open-loop load: rate, latency from due
// time, and failed or non-2xx requests.
func latencyResult(r *load.Result) ProbeResult {
	s := r.Summary()
	return ProbeResult{RPS: s.RPS, P50Ms: s.P50Ms, P99Ms: s.P99Ms, P999Ms: s.P999Ms, MaxMs: s.MaxMs, Errors: s.Failed + s.Non2xx}
}

// smallResult summarizes one small load.
func smallResult(r *load.Result) *SmallResult {
	return &SmallResult{ProbeResult: latencyResult(r)}
}

// waitedRecorder collects the scheduled small requests' Task.Waited from
// the demo's response header.
type waitedRecorder struct {
	mu   sync.Mutex
	hist *hdrhistogram.Histogram // microseconds
}

// newWaitedRecorder returns an empty recorder of waits up to an hour.
func newWaitedRecorder() *waitedRecorder {
	return &waitedRecorder{hist: hdrhistogram.New(1, int64(time.Hour/time.Microsecond), 3)}
}

// record adds the wait a response reports; it is load.Config.OnResponse,
// so safe for concurrent use.
func (w *waitedRecorder) record(r load.Response) {
	ns, err := strconv.ParseInt(r.Header.Get(demo.WaitedHeader), 10, 64)
	if err != nil || ns < 0 {
		return // not a scheduled response (a 503, say)
	}
	w.mu.Lock()
	_ = w.hist.RecordValue(max(1, ns/1e3))
	w.mu.Unlock()
}

// percentiles returns the p50, p99 and max of the recorded waits in ms, or
// nils when none was recorded.
func (w *waitedRecorder) percentiles() (p50, p99, maxMs *float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.hist.TotalCount() == 0 {
		return nil, nil, nil
	}
	ms := func(us int64) *float64 { v := float64(us) / 1e3; return &v }
	return ms(w.hist.ValueAtQuantile(50)), ms(w.hist.ValueAtQuantile(99)), ms(w.hist.Max())
}
