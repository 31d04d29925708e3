// Reading the trace: the first pass finds the probe requests, the
// goroutines they start and the cpusched workers; the second records the
// tracked goroutines' states, what each P ran, and the GC's pauses and
// assists.

package tailtrace

import (
	"bytes"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// probe is one probe task found in the first pass.
type probe struct {
	g          xtrace.GoID
	begin, end xtrace.Time
	seq        uint64
	slow       bool
	sleeper    xtrace.GoID
}

// child is a goroutine creation.
type child struct {
	g  xtrace.GoID
	at xtrace.Time
}

// interval is a stretch of one goroutine in one state.
type interval struct {
	start, end xtrace.Time
	state      xtrace.GoState
	reason     string
	proc       xtrace.ProcID // the P of the transition into it: for Runnable, the P it was queued on; for Running, the P it ran on
	ranOn      xtrace.ProcID // for Runnable: the P it then ran on
	gcWait     bool          // for Waiting: inside the collector (isGCWait)
}

// clip returns the part of iv within [s, e); an interval still open at the
// end of the trace (end 0) runs to e.
func (iv interval) clip(s, e xtrace.Time) (xtrace.Time, xtrace.Time) {
	if iv.end == 0 {
		return max(iv.start, s), e
	}
	return max(iv.start, s), min(iv.end, e)
}

// gor is a tracked goroutine's state history.
type gor struct {
	iv      []interval
	assists []span
}

type span struct{ start, end xtrace.Time }

// procLine is which goroutine a P ran, over time, and which threads
// started it.
type procLine struct {
	at []xtrace.Time
	g  []xtrace.GoID // NoGoroutine: none
	// startAt and startBy: when the P went from idle to running, and on
	// which thread.
	startAt []xtrace.Time
	startBy []xtrace.ThreadID
}

// nextStart returns the thread that started the P next after t, or
// NoThread.
func (l *procLine) nextStart(t xtrace.Time) xtrace.ThreadID {
	i := sort.Search(len(l.startAt), func(i int) bool { return l.startAt[i] > t })
	if i == len(l.startAt) {
		return xtrace.NoThread
	}
	return l.startBy[i]
}

// set records that the P runs g (or nothing) from t on.
func (l *procLine) set(t xtrace.Time, g xtrace.GoID) {
	l.at = append(l.at, t)
	l.g = append(l.g, g)
}

// running returns the goroutine the P ran at t.
func (l *procLine) running(t xtrace.Time) xtrace.GoID {
	i := sort.Search(len(l.at), func(i int) bool { return l.at[i] > t }) - 1
	if i < 0 {
		return xtrace.NoGoroutine
	}
	return l.g[i]
}

type analysis struct {
	cfg      Config
	workers  map[xtrace.GoID]bool
	probes   map[xtrace.TaskID]*probe
	children map[xtrace.GoID][]child
	stacks   map[xtrace.Stack]bool // isWorkerStack's answers
	gcStacks map[xtrace.Stack]bool // isGCWait's answers
	track    map[xtrace.GoID]*gor
	procs    map[xtrace.ProcID]*procLine
	// workerThreads are the threads that ran worker goroutines (locked
	// to them, at low priority).
	workerThreads map[xtrace.ThreadID]bool
	stw           []span
	stwOpen       xtrace.Time
	gcs           int
	first         xtrace.Time
	last          xtrace.Time
	clock         *xtrace.ClockSnapshot // the first one: trace time to wall clock
	timerP        xtrace.ProcID         // follow's current sleeper's timer P
}

// wall converts a trace time to the wall clock.
func (a *analysis) wall(t xtrace.Time) time.Time {
	return a.clock.Wall.Add(time.Duration(t - a.clock.Trace))
}

// traceTime converts a wall-clock time to the trace's clock.
func (a *analysis) traceTime(t time.Time) xtrace.Time {
	return a.clock.Trace + xtrace.Time(t.Sub(a.clock.Wall))
}

// trackG makes the second pass record g's states.
func (a *analysis) trackG(g xtrace.GoID) {
	if a.track[g] == nil {
		a.track[g] = &gor{}
	}
}

// scan reads the trace in data and hands every event to f.
func (a *analysis) scan(data []byte, f func(ev *xtrace.Event)) error {
	rd, err := xtrace.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("tailtrace: %w", err)
	}
	for {
		ev, err := rd.ReadEvent()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("tailtrace: %w", err)
		}
		f(&ev)
	}
}

// isWorkerStack reports whether a stack belongs to a cpusched worker: one
// of its frames is the worker loop (library.go).
func (a *analysis) isWorkerStack(s xtrace.Stack) bool {
	if s == xtrace.NoStack {
		return false
	}
	is, ok := a.stacks[s]
	if !ok {
		for f := range s.Frames() {
			if isWorkerFrame(f.Func) {
				is = true
				break
			}
		}
		a.stacks[s] = is
	}
	return is
}

// gcWaitReason is the reason a trace gives for an assist parked until
// there is marking to do.
const gcWaitReason = "GC mark assist wait for work"

// isGCWait reports whether a goroutine that began to wait for reason with
// stack s waits inside the collector: parked in an assist, or an assist or
// an allocation waiting for the collector's phase to change (in the trace
// a plain "sync" wait, known by its stack).
func (a *analysis) isGCWait(reason string, s xtrace.Stack) bool {
	if reason == gcWaitReason {
		return true
	}
	if s == xtrace.NoStack {
		return false
	}
	is, ok := a.gcStacks[s]
	if !ok {
		for f := range s.Frames() {
			if f.Func == "runtime.gcAssistAlloc" || f.Func == "runtime.gcStart" {
				is = true
				break
			}
		}
		a.gcStacks[s] = is
	}
	return is
}

// firstPass finds the probe tasks, goroutine creations and the workers.
func (a *analysis) firstPass(ev *xtrace.Event) {
	if a.first == 0 {
		a.first = ev.Time()
	}
	a.last = ev.Time()
	switch ev.Kind() {
	case xtrace.EventSync:
		if cs := ev.Sync().ClockSnapshot; cs != nil && a.clock == nil {
			a.clock = cs
		}
	case xtrace.EventTaskBegin:
		if t := ev.Task(); t.Type == a.cfg.TaskType {
			a.probes[t.ID] = &probe{g: ev.Goroutine(), begin: ev.Time()}
		}
	case xtrace.EventTaskEnd:
		if p := a.probes[ev.Task().ID]; p != nil {
			p.end = ev.Time()
		}
	case xtrace.EventLog:
		l := ev.Log()
		if p := a.probes[l.Task]; p != nil && l.Category == a.cfg.SeqCategory {
			p.seq, _ = strconv.ParseUint(l.Message, 10, 64)
		}
	case xtrace.EventRegionBegin:
		if ev.Region().Type == runRegion {
			a.workers[ev.Goroutine()] = true
		}
	case xtrace.EventStateTransition:
		st := ev.StateTransition()
		if st.Resource.Kind != xtrace.ResourceGoroutine {
			return
		}
		g := st.Resource.Goroutine()
		from, to := st.Goroutine()
		if from == xtrace.GoNotExist && to == xtrace.GoRunnable && ev.Goroutine() != xtrace.NoGoroutine {
			a.children[ev.Goroutine()] = append(a.children[ev.Goroutine()], child{g: g, at: ev.Time()})
		}
		if !a.workers[g] && a.isWorkerStack(st.Stack) {
			a.workers[g] = true
		}
	}
	if g := ev.Goroutine(); g != xtrace.NoGoroutine && !a.workers[g] && ev.Kind() == xtrace.EventStateTransition && a.isWorkerStack(ev.Stack()) {
		a.workers[g] = true
	}
}

// secondPass records the tracked goroutines' states, every P's goroutine
// and the GC's pauses and assists.
func (a *analysis) secondPass(ev *xtrace.Event) {
	switch ev.Kind() {
	case xtrace.EventRangeBegin, xtrace.EventRangeActive:
		r := ev.Range()
		switch {
		case strings.HasPrefix(r.Name, "stop-the-world"):
			a.stwOpen = ev.Time()
		case r.Name == "GC concurrent mark phase" && ev.Kind() == xtrace.EventRangeBegin:
			a.gcs++
		case r.Name == "GC mark assist":
			if g := a.track[r.Scope.Goroutine()]; g != nil {
				g.assists = append(g.assists, span{start: ev.Time()})
			}
		}
	case xtrace.EventRangeEnd:
		r := ev.Range()
		switch {
		case strings.HasPrefix(r.Name, "stop-the-world"):
			if a.stwOpen != 0 {
				a.stw = append(a.stw, span{a.stwOpen, ev.Time()})
				a.stwOpen = 0
			}
		case r.Name == "GC mark assist":
			if g := a.track[r.Scope.Goroutine()]; g != nil && len(g.assists) > 0 {
				g.assists[len(g.assists)-1].end = ev.Time()
			}
		}
	case xtrace.EventStateTransition:
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case xtrace.ResourceProc:
			l := a.proc(st.Resource.Proc())
			if from, to := st.Proc(); to != xtrace.ProcRunning {
				l.set(ev.Time(), xtrace.NoGoroutine)
			} else if from == xtrace.ProcIdle {
				l.startAt = append(l.startAt, ev.Time())
				l.startBy = append(l.startBy, ev.Thread())
			}
		case xtrace.ResourceGoroutine:
			a.goTransition(ev, st)
		}
	}
}

// proc returns P p's line, made on first use.
func (a *analysis) proc(p xtrace.ProcID) *procLine {
	l := a.procs[p]
	if l == nil {
		l = &procLine{}
		a.procs[p] = l
	}
	return l
}

// goTransition records a goroutine's change of state: on its P's line,
// in the threads that ran workers, and in its history if it is tracked.
func (a *analysis) goTransition(ev *xtrace.Event, st xtrace.StateTransition) {
	g := st.Resource.Goroutine()
	from, to := st.Goroutine()
	t := ev.Time()
	if to == xtrace.GoRunning && a.workers[g] {
		a.workerThreads[ev.Thread()] = true
	}
	if p := ev.Proc(); p != xtrace.NoProc {
		switch {
		case to.Executing():
			a.proc(p).set(t, g)
		case from.Executing():
			a.proc(p).set(t, xtrace.NoGoroutine)
		}
	}
	tg := a.track[g]
	if tg == nil {
		return
	}
	if n := len(tg.iv); n > 0 && tg.iv[n-1].end == 0 {
		last := &tg.iv[n-1]
		last.end = t
		if last.state == xtrace.GoRunnable {
			last.ranOn = ev.Proc()
		}
	}
	tg.iv = append(tg.iv, interval{start: t, state: to, reason: st.Reason, proc: ev.Proc(), ranOn: xtrace.NoProc,
		gcWait: to == xtrace.GoWaiting && a.isGCWait(st.Reason, st.Stack)})
}

// from returns the index of g's first interval that has not ended by t
// (len(g.iv) if none).
func (g *gor) from(t xtrace.Time) int {
	return sort.Search(len(g.iv), func(i int) bool { return g.iv[i].end == 0 || g.iv[i].end > t })
}

// at returns the index of g's interval that contains t, or -1.
func (g *gor) at(t xtrace.Time) int {
	i := sort.Search(len(g.iv), func(i int) bool { return g.iv[i].start > t }) - 1
	if i < 0 || g.iv[i].end != 0 && g.iv[i].end < t {
		return -1
	}
	return i
}
