package admission

import (
	"testing"
	"time"

	"github.com/cpusched/cpusched/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m) }

func TestLimit(t *testing.T) {
	// Steps on one limit with a 10ms budget, starting at 4 (16 until the
	// first sample: TestLimitColdStart). Calls are
	// named by a letter; observe's wait is a call's queueing delay in
	// total (Task.Waited), given as its handler ends; dropped's is its wait
	// for a first slot it never got.
	const ms = time.Millisecond
	steps := []struct {
		op           string // admit, observe (handler ended), dropped (queue full), cancelled (context ended)
		req          byte
		wait         time.Duration
		wantAdmit    bool // admit
		wantInflight int64
		wantLimit    int64
	}{
		{op: "admit", req: 'a', wantAdmit: true, wantInflight: 1, wantLimit: 16},
		{op: "observe", req: 'a', wait: 1 * ms, wantInflight: 0, wantLimit: 4}, // warm; 1 of 4 used: no increase
		{op: "admit", req: 'a', wantAdmit: true, wantInflight: 1, wantLimit: 4},
		{op: "admit", req: 'b', wantAdmit: true, wantInflight: 2, wantLimit: 4},
		{op: "admit", req: 'c', wantAdmit: true, wantInflight: 3, wantLimit: 4},
		{op: "admit", req: 'd', wantAdmit: true, wantInflight: 4, wantLimit: 4},
		{op: "admit", req: 'e', wantAdmit: false, wantInflight: 4, wantLimit: 4}, // inflight == limit: shed
		{op: "observe", req: 'a', wait: 10 * ms, wantInflight: 3, wantLimit: 5},  // within budget, the limit full: +1
		{op: "admit", req: 'e', wantAdmit: true, wantInflight: 4, wantLimit: 5},
		{op: "admit", req: 'f', wantAdmit: true, wantInflight: 5, wantLimit: 5},
		{op: "observe", req: 'b', wait: 20 * ms, wantInflight: 4, wantLimit: 2}, // over budget: halved, the round ends
		{op: "observe", req: 'c', wait: 30 * ms, wantInflight: 3, wantLimit: 2}, // same round: no second decrease
		{op: "admit", req: 'g', wantAdmit: false, wantInflight: 3, wantLimit: 2},
		{op: "observe", req: 'd', wait: 1 * ms, wantInflight: 2, wantLimit: 2}, // old round: no increase either
		{op: "observe", req: 'e', wait: 1 * ms, wantInflight: 1, wantLimit: 2},
		{op: "observe", req: 'f', wait: 1 * ms, wantInflight: 0, wantLimit: 2},
		{op: "admit", req: 'g', wantAdmit: true, wantInflight: 1, wantLimit: 2},
		{op: "admit", req: 'h', wantAdmit: true, wantInflight: 2, wantLimit: 2},
		{op: "observe", req: 'g', wait: 1 * ms, wantInflight: 1, wantLimit: 3}, // the new round, full: +1
		{op: "observe", req: 'h', wait: 50 * ms, wantInflight: 0, wantLimit: 1},
		{op: "admit", req: 'i', wantAdmit: true, wantInflight: 1, wantLimit: 1},
		{op: "observe", req: 'i', wait: 50 * ms, wantInflight: 0, wantLimit: 1}, // floor 1
		{op: "admit", req: 'j', wantAdmit: true, wantInflight: 1, wantLimit: 1}, // ... so one is always admitted
		{op: "dropped", req: 'j', wait: 50 * ms, wantInflight: 0, wantLimit: 1}, // queue full: no sample
		{op: "admit", req: 'k', wantAdmit: true, wantInflight: 1, wantLimit: 1},
		{op: "cancelled", req: 'k', wait: 5 * ms, wantInflight: 0, wantLimit: 1}, // a lower bound within budget: no sample
		{op: "admit", req: 'l', wantAdmit: true, wantInflight: 1, wantLimit: 1},
		{op: "observe", req: 'l', wait: 0, wantInflight: 0, wantLimit: 2},
		{op: "admit", req: 'm', wantAdmit: true, wantInflight: 1, wantLimit: 2},
		{op: "cancelled", req: 'm', wait: 30 * ms, wantInflight: 0, wantLimit: 1}, // a lower bound over budget: halved
	}
	l := New(10*ms, 4)
	rounds := map[byte]uint64{}
	for i, st := range steps {
		switch st.op {
		case "admit":
			round, ok := l.Admit()
			if ok != st.wantAdmit {
				t.Errorf("step %d: admit %c: got %t, want %t", i, st.req, ok, st.wantAdmit)
			}
			rounds[st.req] = round
		case "observe":
			l.Observe(st.wait, rounds[st.req])
		case "dropped", "cancelled":
			l.Dropped(st.wait, rounds[st.req], st.op == "cancelled")
		}
		if in, lim := l.Inflight(), l.Current(); in != st.wantInflight || lim != st.wantLimit {
			t.Errorf("step %d (%s %c %v): got inflight %d, limit %d; want %d, %d",
				i, st.op, st.req, st.wait, in, lim, st.wantInflight, st.wantLimit)
		}
	}
}

func TestLimitColdStart(t *testing.T) {
	// Until the first sample the limit admits coldFactor (4) times its
	// initial 2: a burst at startup is not shed before its waits are
	// known (regression: 6 requests on 2 workers, 4 answered 503 at
	// once). The first sample ends that: within the budget it raises the
	// limit to the calls in flight; over it, it halves the limit from 2.
	// A call the scheduler refused gives no sample and leaves it cold.
	const ms = time.Millisecond
	tests := []struct {
		name      string
		burst     int64                        // calls admitted at once
		end       func(l *Limit, round uint64) // one of them ends
		wantShed  bool                         // a call after the end
		wantLimit int64                        // after the end
	}{
		{"first sample within the budget", 6, func(l *Limit, r uint64) { l.Observe(5*ms, r) }, false, 7},    // raised to 6, full: +1
		{"first sample fills the cold limit", 8, func(l *Limit, r uint64) { l.Observe(5*ms, r) }, false, 9}, // raised to 8, full: +1
		{"first sample over the budget", 6, func(l *Limit, r uint64) { l.Observe(50*ms, r) }, true, 1},      // 2 halved; 5 still in
		{"cancelled over the budget", 6, func(l *Limit, r uint64) { l.Dropped(50*ms, r, true) }, true, 1},
		{"cancelled within the budget: no sample", 6, func(l *Limit, r uint64) { l.Dropped(5*ms, r, true) }, false, 8},
		{"refused: no sample", 6, func(l *Limit, r uint64) { l.Dropped(50*ms, r, false) }, false, 8},
	}
	for _, tt := range tests {
		l := New(10*ms, 2)
		var round uint64
		for i := range tt.burst {
			r, ok := l.Admit()
			if !ok {
				t.Fatalf("%s: call %d of the burst shed, want every one of %d admitted (cold limit 8)", tt.name, i+1, tt.burst)
			}
			round = r
		}
		if _, ok := l.Admit(); ok != (tt.burst < 8) {
			t.Errorf("%s: a call beyond a burst of %d: got admitted %t, want %t", tt.name, tt.burst, ok, tt.burst < 8)
		} else if ok {
			l.Dropped(0, round, false)
		}
		tt.end(l, round)
		if got := l.Current(); got != tt.wantLimit {
			t.Errorf("%s: got limit %d, want %d", tt.name, got, tt.wantLimit)
		}
		if _, ok := l.Admit(); ok == tt.wantShed {
			t.Errorf("%s: a call after: got admitted %t, want %t", tt.name, ok, !tt.wantShed)
		}
	}
}

func TestLimitBounds(t *testing.T) {
	tests := []struct {
		name      string
		initial   int   // New's
		inflight  int64 // set before the call
		wantLimit int64 // after one call admitted and observed within budget
	}{
		{"initial 0 is 1", 0, 0, 2},
		{"initial above the cap", 1 << 20, MaxLimit - 1, MaxLimit},
		{"the cap", MaxLimit, MaxLimit - 1, MaxLimit},
		{"below the cap", MaxLimit - 1, MaxLimit - 2, MaxLimit},
	}
	for _, tt := range tests {
		l := New(time.Millisecond, tt.initial)
		l.inflight.Store(tt.inflight)
		round, ok := l.Admit()
		if !ok {
			t.Errorf("%s: admit: got false, want true", tt.name)
			continue
		}
		l.Observe(0, round)
		if got := l.Current(); got != tt.wantLimit || l.Inflight() != tt.inflight {
			t.Errorf("%s: got limit %d, inflight %d; want %d, %d", tt.name, got, l.Inflight(), tt.wantLimit, tt.inflight)
		}
	}
}
