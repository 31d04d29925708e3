package tailtrace

import (
	"bytes"
	"strings"
	"testing"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// subsAnalysis returns an analysis of two Ps at time 1000: P0 runs
// goroutine g0 (a cpusched worker when p0Worker), P1 runs g1 unless p1Idle.
func subsAnalysis(p0Worker, p1Idle bool) *analysis {
	a := &analysis{workers: map[xtrace.GoID]bool{10: p0Worker}, workerThreads: map[xtrace.ThreadID]bool{}, procs: map[xtrace.ProcID]*procLine{}}
	a.proc(0).set(0, 10)
	if p1Idle {
		a.proc(1).set(0, xtrace.NoGoroutine)
	} else {
		a.proc(1).set(0, 11)
	}
	return a
}

// TestSubsOfTimerLate: a timer late on an idle P counts under
// SubTimerIdleP; on a P a worker held it is CauseTimerOnWkr, with no sub;
// on a P another goroutine held, CauseTimerLate alone.
func TestSubsOfTimerLate(t *testing.T) {
	const due = 500
	waiting := interval{start: 100, end: 1500, state: xtrace.GoWaiting}
	for _, c := range []struct {
		name     string
		a        *analysis
		timerP   xtrace.ProcID
		cause    Cause
		idleLate bool
	}{
		{"idle P", subsAnalysis(false, true), 1, CauseTimerLate, true},
		{"worker's P", subsAnalysis(true, false), 0, CauseTimerOnWkr, false},
		{"other's P", subsAnalysis(false, false), 1, CauseTimerLate, false},
	} {
		var req Request
		c.a.timerP = c.timerP
		c.a.chargeInterval(&req, &gor{}, "sleeper", waiting, waiting.start, waiting.end, due)
		late := time.Duration(waiting.end - due)
		if req.Parts[CauseSleep] != due-100 || req.Parts[c.cause] != late {
			t.Errorf("%s: sleep %v, %v %v; want %v and %v", c.name, req.Parts[CauseSleep], c.cause, req.Parts[c.cause], time.Duration(due-100), late)
		}
		want := time.Duration(0)
		if c.idleLate {
			want = late
		}
		if got := req.Subs[SubTimerIdleP]; got != want {
			t.Errorf("%s: %v = %v, want %v", c.name, SubTimerIdleP, got, want)
		}
	}
}

// TestSubsOfIntervals: a runnable wait with every P busy counts under
// SubBusyWorkers only when a worker held one of them; the handler's own
// wait is blocked, and under SubBlockedGC when it waits in the collector.
func TestSubsOfIntervals(t *testing.T) {
	runnable := interval{start: 800, end: 1200, state: xtrace.GoRunnable, proc: 1, ranOn: 1}
	waiting := interval{start: 800, end: 1200, state: xtrace.GoWaiting}
	gcWaiting := waiting
	gcWaiting.gcWait = true
	for _, c := range []struct {
		name  string
		a     *analysis
		iv    interval
		cause Cause
		sub   Sub
		inSub bool
	}{
		{"busy, no worker", subsAnalysis(false, false), runnable, CauseRunnableBusy, SubBusyWorkers, false},
		{"busy, a worker", subsAnalysis(true, false), runnable, CauseRunnableBusy, SubBusyWorkers, true},
		{"blocked", subsAnalysis(false, false), waiting, CauseBlocked, SubBlockedGC, false},
		{"blocked in the GC", subsAnalysis(false, false), gcWaiting, CauseBlocked, SubBlockedGC, true},
	} {
		var req Request
		c.a.chargeInterval(&req, &gor{}, "handler", c.iv, c.iv.start, c.iv.end, 0)
		want := time.Duration(0)
		if c.inSub {
			want = 400
		}
		if req.Parts[c.cause] != 400 || req.Subs[c.sub] != want {
			t.Errorf("%s: %v %v, %v %v; want 400ns and %v", c.name, c.cause, req.Parts[c.cause], c.sub, req.Subs[c.sub], want)
		}
	}
}

// TestNoIdleP: a P that runs nothing is idle unless a worker's thread is
// the next to take it (a hand-off); no Ps at all is not "no idle P".
func TestNoIdleP(t *testing.T) {
	if !subsAnalysis(false, false).noIdleP(1000) {
		t.Error("both Ps running: noIdleP false")
	}
	a := subsAnalysis(false, true)
	if a.noIdleP(1000) {
		t.Error("P1 idle: noIdleP true")
	}
	l := a.proc(1)
	l.startAt, l.startBy = []xtrace.Time{2000}, []xtrace.ThreadID{7}
	a.workerThreads[7] = true
	if !a.noIdleP(1000) {
		t.Error("P1 being handed to a worker's thread: noIdleP false")
	}
	if (&analysis{procs: map[xtrace.ProcID]*procLine{}}).noIdleP(0) {
		t.Error("no Ps: noIdleP true")
	}
}

// TestSubsWithinParents: in a real trace every request's subs fit in their
// causes, and the report prints each sub under its cause.
func TestSubsWithinParents(t *testing.T) {
	data, clients := probeTrace(t, 10)
	b, err := Analyze(bytes.NewReader(data), Config{TaskType: testTaskType, SeqCategory: testSeqCat, Sleep: time.Millisecond, Client: clients})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range b.Requests {
		for s, d := range r.Subs {
			if p := Sub(s).Parent(); d > r.Parts[p] {
				t.Errorf("#%d: %v %v, more than its cause %v's %v", r.Seq, Sub(s), d, p, r.Parts[p])
			}
		}
	}
	var out strings.Builder
	if err := b.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for s := range numSubs {
		parent, sub := strings.Index(text, b.name(s.Parent())), strings.Index(text, "  "+s.String())
		if parent < 0 || sub < parent || strings.Count(text[parent:sub], "\n") != 1 {
			t.Errorf("%v is not on the line after %v:\n%s", s, s.Parent(), text)
		}
	}
}

func TestSubString(t *testing.T) {
	for s := range numSubs {
		if s.String() == "" || !strings.HasPrefix(s.String(), "of which ") {
			t.Errorf("sub %d: name %q", int(s), s.String())
		}
		if len(s.String()) > 60 {
			t.Errorf("sub %v: name longer than the report's 60 columns", s)
		}
	}
	if got := Sub(-1).String(); got != "Sub(-1)" {
		t.Errorf("Sub(-1).String() = %q", got)
	}
}

// TestIsGCWait: a parked assist is known by its reason; a wait with no
// stack and another reason is not the collector's.
func TestIsGCWait(t *testing.T) {
	a := &analysis{gcStacks: map[xtrace.Stack]bool{}}
	if !a.isGCWait(gcWaitReason, xtrace.NoStack) {
		t.Errorf("%q: not a GC wait", gcWaitReason)
	}
	if a.isGCWait("sync", xtrace.NoStack) || a.isGCWait("chan receive", xtrace.NoStack) {
		t.Error("a wait with no stack taken for the collector's")
	}
}

// TestStopWaits: a stop-the-world's waits are those of the Ps that ran a
// goroutine as it began, until that goroutine left within the stop; the
// P that keeps its goroutine (the stopper's) and idle Ps do not count.
func TestStopWaits(t *testing.T) {
	line := func(pairs ...int64) *procLine {
		l := &procLine{}
		for i := 0; i < len(pairs); i += 2 {
			l.set(xtrace.Time(pairs[i]), xtrace.GoID(pairs[i+1]))
		}
		return l
	}
	none := int64(xtrace.NoGoroutine)
	procs := map[xtrace.ProcID]*procLine{
		0: line(0, 1, 1_000, none),        // g1, a worker, stops 900 ns in
		1: line(0, 2, 1_300, none),        // g2 stops 1,200 ns in
		2: line(0, 3),                     // g3 stopped the world: keeps its P
		3: line(0, none),                  // idle
		4: line(0, 4, 50, none, 2_000, 5), // g4 left before the stop
		5: line(0, 6, 5_000, none),        // g6 leaves after the stop's end
	}
	workers := map[xtrace.GoID]bool{1: true, 6: true}
	all, worker := stopWaits(procs, workers, span{start: 100, end: 3_000})
	if all != 1_200 || worker != 900 {
		t.Errorf("stopWaits: %v, %v; want 1.2us, 900ns", all, worker)
	}
}
