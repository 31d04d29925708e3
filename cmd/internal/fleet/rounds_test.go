package fleet

import (
	"math"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched/cmd/internal/bench"
)

// TestRoundOrder: each round starts one policy further on, so that over
// as many rounds as policies each takes every place once.
func TestRoundOrder(t *testing.T) {
	for _, tt := range []struct {
		policies, round int
		want            []int
	}{
		{3, 0, []int{0, 1, 2}},
		{3, 1, []int{1, 2, 0}},
		{3, 2, []int{2, 0, 1}},
		{3, 3, []int{0, 1, 2}},
		{1, 4, []int{0}},
	} {
		if got := roundOrder(tt.policies, tt.round); !slices.Equal(got, tt.want) {
			t.Errorf("roundOrder(%d, %d) = %v, want %v", tt.policies, tt.round, got, tt.want)
		}
	}
}

// fakeSegment is a segment of two replicas whose calls all took latency:
// n calls to the first, one failed, and n to the second.
func fakeSegment(n int, latency time.Duration, secs, busy, cpu0 float64, throttled int64) segment {
	rec := newRecording(2)
	for r := range 2 {
		for i := range n {
			var err error
			if r == 0 && i == 0 {
				err = status.Error(codes.DeadlineExceeded, "late")
			}
			rec.record(mix[i%len(mix)], r, latency, err, nil)
		}
	}
	procs := []*replicaProc{{spec: replicaSpec{cpuLimit: 0.3}, hello: hello{CPULimit: 0.3}}, {spec: replicaSpec{cpuLimit: 0.8}, hello: hello{CPULimit: 0.8}}}
	return segment{procs: procs, rec: rec, w: window{
		seconds: secs, machineBusy: busy, clientCPU: math.NaN(),
		cpuUsed: []float64{cpu0, 0.5}, batchPasses: []int64{100, 0},
		throttled: []*bench.CgroupCPUStat{{Periods: 10, Throttled: throttled, ThrottledMs: float64(throttled)}, nil},
	}}
}

// TestRowsMerge: a row merges its policy's segments of every completed
// round: the calls and counts add up, the percentiles cover every call,
// the CPU figures are weighted by each segment's length.
func TestRowsMerge(t *testing.T) {
	rows := newRows(1)
	rows.add(0, fakeSegment(10, time.Millisecond, 1, 40, 0.2, 2))
	rows.endRound()
	rows.add(0, fakeSegment(30, 100*time.Millisecond, 3, 80, 0.6, 6))
	rows.endRound()
	res := rows.result(0, ScenarioQuota, PolicyWRR, 20)
	if res == nil {
		t.Fatal("no row")
	}
	if res.Rounds != 2 || res.Calls != 80 || res.Errors != 2 || res.ErrorsByCode["DeadlineExceeded"] != 2 {
		t.Errorf("rounds %d, calls %d, errors %d %v; want 2, 80, 2 DeadlineExceeded", res.Rounds, res.Calls, res.Errors, res.ErrorsByCode)
	}
	if len(res.RoundP99Ms) != 2 || math.Abs(*res.RoundP99Ms[0]-1) > 0.01 || math.Abs(*res.RoundP99Ms[1]-100) > 0.1 {
		t.Errorf("the rounds' p99s %v, want about 1 and 100 ms", res.RoundP99Ms)
	}
	if res.ReqS != 78.0/4 {
		t.Errorf("req/s %v, want 78 calls over 4 s", res.ReqS)
	}
	// 20 of the 80 calls took 1 ms, 60 took 100 ms: the p50 and p99 are
	// the second segment's, which neither segment alone would say of both.
	if math.Abs(res.P50Ms-100) > 1 || res.Methods[heavy].Calls != 40 {
		t.Errorf("p50 %v ms, heavy calls %d; want about 100 ms and 40", res.P50Ms, res.Methods[heavy].Calls)
	}
	r0 := res.Replicas[0]
	if r0.Calls != 40 || r0.Errors != 2 || r0.Share != 0.5 || r0.CPULimit != 0.3 {
		t.Errorf("replica 0: %d calls, %d errors, share %v, limit %v; want 40, 2, 0.5, 0.3", r0.Calls, r0.Errors, r0.Share, r0.CPULimit)
	}
	if r0.CPUUsed == nil || math.Abs(*r0.CPUUsed-0.5) > 1e-9 {
		t.Errorf("replica 0 cpu used %v, want (0.2x1 + 0.6x3)/4 = 0.5", r0.CPUUsed)
	}
	if res.MachineBusyPct == nil || *res.MachineBusyPct != 70 || res.ClientCPU != nil {
		t.Errorf("machine busy %v, client cpu %v; want (40x1 + 80x3)/4 = 70 and null", res.MachineBusyPct, res.ClientCPU)
	}
	if r0.ThrottledPct == nil || *r0.ThrottledPct != 40 || *r0.ThrottledMs != 8 || r0.BatchPassesPerS != 50 {
		t.Errorf("replica 0: throttled %v%% for %v ms, batch passes/s %v; want 8 of 20 periods = 40%%, 8 ms, 200 over 4 s",
			r0.ThrottledPct, r0.ThrottledMs, r0.BatchPassesPerS)
	}
}

// TestRowsIncompleteRound: a round that an interruption cut short is
// dropped for every policy, so that the rows cover the same rounds.
func TestRowsIncompleteRound(t *testing.T) {
	rows := newRows(2)
	if rows.result(0, ScenarioBatch, PolicyRoundRobin, 10) != nil {
		t.Error("a row before any round")
	}
	rows.add(0, fakeSegment(4, time.Millisecond, 1, 50, 0.1, 0))
	rows.add(1, fakeSegment(4, time.Millisecond, 1, 50, 0.1, 0))
	rows.endRound()
	rows.add(1, fakeSegment(8, time.Millisecond, 1, 50, 0.1, 0))
	rows.endRound() // policy 0's segment of this round never ran
	for pi := range 2 {
		res := rows.result(pi, ScenarioBatch, PolicyRoundRobin, 10)
		if res == nil || res.Rounds != 1 || res.Calls != 8 {
			t.Errorf("policy %d: %+v, want the first round's 8 calls only", pi, res)
		}
	}
}

// TestDueTimes: fixed arrivals fall due 1/rate apart; Poisson ones at the
// rate on average, at gaps that vary as an exponential's do, the same for
// the same seed and different for another.
func TestDueTimes(t *testing.T) {
	next := dueTimes(ArrivalsFixed, 100, 1)
	for i := range 5 {
		if got, want := next(), time.Duration(i)*10*time.Millisecond; got != want {
			t.Fatalf("fixed call %d due at %v, want %v", i, got, want)
		}
	}
	const n, rate = 20000, 400.0
	times := func(seed uint64) []time.Duration {
		next := dueTimes(ArrivalsPoisson, rate, seed)
		ts := make([]time.Duration, n)
		for i := range ts {
			ts[i] = next()
		}
		return ts
	}
	a := times(7)
	if a[0] != 0 {
		t.Errorf("the first Poisson call is due at %v, want at the start", a[0])
	}
	var sum, sumSq float64
	for i := 1; i < n; i++ {
		gap := (a[i] - a[i-1]).Seconds()
		if gap < 0 {
			t.Fatalf("call %d due before call %d", i, i-1)
		}
		sum += gap
		sumSq += gap * gap
	}
	mean := sum / (n - 1)
	cv := math.Sqrt(sumSq/(n-1)-mean*mean) / mean
	if math.Abs(mean*rate-1) > 0.03 || math.Abs(cv-1) > 0.05 {
		t.Errorf("Poisson gaps: mean %v s (want %v), coefficient of variation %v (want 1, an exponential's)", mean, 1/rate, cv)
	}
	if !slices.Equal(a, times(7)) || slices.Equal(a, times(8)) {
		t.Error("want the same due times for a seed, others for another")
	}
}
