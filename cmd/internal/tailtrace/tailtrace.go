// Package tailtrace attributes a probe's slow requests to their causes,
// from a runtime/trace of the server that answered them.
//
// The probe is the demo server's /delay endpoint: the handler goroutine
// starts a sleeper goroutine, the sleeper waits on a 1 ms timer and wakes
// the handler, which answers. While a trace is recorded, each request is a
// trace task (demo.ProbeTaskType) whose log carries its sequence number,
// and the client knows each request's latency by that number (the
// response's demo.ProbeSeqHeader), so a slow request as the client saw it
// can be found in the trace.
//
// A request's server span runs from the moment its connection goroutine
// became runnable (the network poller saw the request) to the moment that
// goroutine waited on the network again (the response written). Along the
// span, Analyze follows the goroutine the request waits for: the handler,
// or the sleeper while the handler waits for it. Each stretch of time is
// charged to one Cause by that goroutine's state: running, runnable (and
// then by what held the Ps), in a system call, waiting for its timer (the
// sleep itself, then the timer's lateness), or blocked otherwise. Time
// inside a stop-the-world pause goes to CauseGCStop, running time inside a
// mark assist to CauseGCAssist. What the client measured beyond the span is
// CauseOutside: the client itself, the loopback and the time before the
// network poller noticed the request.
package tailtrace

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// Cause is where part of a request's time went.
type Cause int

// The causes, in the order reports list them.
const (
	CauseClientLate      Cause = iota // the client sent the request after its due time
	CauseInbound                      // sent until the server's poller made the handler runnable
	CauseOutbound                     // response written until the client had read it
	CauseOutside                      // client and loopback, when the trace has no clock snapshot
	CauseRunnableOnWkr                // runnable, queued on a P a worker held (or was being handed)
	CauseRunnableHandoff              // runnable while a P was being handed to a worker thread that had not yet run
	CauseRunnableBusy                 // runnable, every P held by a goroutine
	CauseRunnableIdleP                // runnable while some P had no goroutine (wake-up latency)
	CauseGCStop                       // inside a stop-the-world pause
	CauseGCAssist                     // running a GC mark assist
	CauseTimerOnWkr                   // the timer fired late; its P was held by (or being handed to) a worker at the due time
	CauseTimerLate                    // the timer fired late otherwise
	CauseRunning                      // running the handler or the sleeper
	CauseSyscall                      // in a system call
	CauseBlocked                      // blocked on something other than the probe's own timer
	CauseSleep                        // the probe's own sleep (not a delay)
	numCauses
)

var causeNames = [numCauses]string{
	CauseClientLate:      "client: request sent after its due time",
	CauseInbound:         "sent until the server's poller woke the handler",
	CauseOutbound:        "response written until the client had read it",
	CauseOutside:         "outside the server's span (no clock snapshot to split it)",
	CauseRunnableOnWkr:   "runnable, queued on a P held by (or handed to) a cpusched worker",
	CauseRunnableHandoff: "runnable while a P waited for a worker thread to take it",
	CauseRunnableBusy:    "runnable, every P held (none by a worker holding its queue)",
	CauseRunnableIdleP:   "runnable while a P was idle (wake-up latency)",
	CauseGCStop:          "GC stop-the-world",
	CauseGCAssist:        "GC mark assist",
	CauseTimerOnWkr:      "timer late, its P held by (or handed to) a cpusched worker",
	CauseTimerLate:       "timer late, its P not held by a worker",
	CauseRunning:         "running (handler, sleeper)",
	CauseSyscall:         "system call",
	CauseBlocked:         "blocked (other)",
	CauseSleep:           "the 1 ms sleep itself",
}

func (c Cause) String() string {
	if c < 0 || c >= numCauses {
		return "Cause(" + strconv.Itoa(int(c)) + ")"
	}
	return causeNames[c]
}

// Causes returns every Cause in report order.
func Causes() []Cause {
	out := make([]Cause, numCauses)
	for i := range out {
		out[i] = Cause(i)
	}
	return out
}

// Config says what to analyze.
type Config struct {
	// TaskType and SeqCategory name the probe's trace task and the log
	// category of its sequence number (demo.ProbeTaskType,
	// demo.ProbeSeqCategory).
	TaskType, SeqCategory string
	// Sleep is what the probe handler sleeps (1 ms for /delay1ms).
	Sleep time.Duration
	// Threshold: a request whose client latency is above it is slow.
	Threshold time.Duration
	// Client is the client's view of each request, by sequence number.
	Client map[uint64]Client
}

// Client is the client's view of one request.
type Client struct {
	Latency    time.Duration // as the client charged it, from the request's due time
	Sent, Done time.Time     // when it was sent, and when its response had been read
}

// Wait is one stretch during which a slow request's goroutine was runnable
// and not running, with what held the Ps halfway through it.
type Wait struct {
	Who      string        // "handler" or "sleeper"
	Dur      time.Duration // how long it stayed runnable
	Cause    Cause         // one of the Runnable causes
	Workers  int           // Ps running a cpusched worker goroutine halfway through
	Others   int           // Ps running another goroutine then
	IdlePs   int           // Ps running nothing then
	Handoffs int           // Ps on their way to a worker thread that had not run yet
	Stolen   bool          // it ran on another P than the one it was queued on
	Holder   string        // what held the P it was queued on then: worker, handoff, other, nothing, or - (queued on no P)
	QueuedOn int64         // that P, or -1 (the global queue)
}

// Request is one slow request's breakdown.
type Request struct {
	Seq     uint64
	Latency time.Duration            // as the client measured it
	Span    time.Duration            // the server span
	Parts   [numCauses]time.Duration // where the latency went
	Main    Cause                    // the largest part other than the sleep
	Waits   []Wait                   // runnable stretches longer than 50 us
}

// Breakdown is Analyze's result.
type Breakdown struct {
	Config     Config
	Traced     int // probe tasks in the trace
	Matched    int // of those, with a client latency
	Slow       int // of those, slower than Threshold
	Requests   []Request
	TraceSpan  time.Duration
	Workers    int // cpusched worker goroutines seen
	STWs       int // stop-the-world pauses in the trace
	STWMax     time.Duration
	GCs        int // GC cycles (mark phases) begun in the trace
	Incomplete int // slow requests whose span could not be followed (begun before the trace, ...)
	// Followed is how many matched requests, slow or not, were followed,
	// and AllParts the sum of their parts: the baseline for the slow ones.
	Followed int
	AllParts [numCauses]time.Duration
}

// Analyze reads a runtime/trace and breaks down every probe request slower
// than cfg.Threshold. It reads the trace twice (it is held in memory).
func Analyze(r io.Reader, cfg Config) (*Breakdown, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("tailtrace: reading the trace: %w", err)
	}
	a := &analysis{cfg: cfg, workers: map[xtrace.GoID]bool{}, probes: map[xtrace.TaskID]*probe{}, children: map[xtrace.GoID][]child{}, stacks: map[xtrace.Stack]bool{}}
	if err := a.scan(data, a.firstPass); err != nil {
		return nil, err
	}
	a.track = map[xtrace.GoID]*gor{}
	for _, p := range a.probes {
		if p.seq == 0 || p.end == 0 {
			continue
		}
		c, ok := cfg.Client[p.seq]
		if !ok {
			continue
		}
		p.slow = c.Latency > cfg.Threshold
		a.trackG(p.g)
		for _, c := range a.children[p.g] {
			if c.at >= p.begin && c.at <= p.end {
				p.sleeper = c.g
				a.trackG(c.g)
				break
			}
		}
	}
	a.procs = map[xtrace.ProcID]*procLine{}
	a.workerThreads = map[xtrace.ThreadID]bool{}
	if err := a.scan(data, a.secondPass); err != nil {
		return nil, err
	}
	return a.breakdown(), nil
}

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

func (a *analysis) trackG(g xtrace.GoID) {
	if a.track[g] == nil {
		a.track[g] = &gor{}
	}
}

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

func (a *analysis) proc(p xtrace.ProcID) *procLine {
	l := a.procs[p]
	if l == nil {
		l = &procLine{}
		a.procs[p] = l
	}
	return l
}

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
	tg.iv = append(tg.iv, interval{start: t, state: to, reason: st.Reason, proc: ev.Proc(), ranOn: xtrace.NoProc})
}

// at returns the index of g's interval that contains t, or -1.
func (g *gor) at(t xtrace.Time) int {
	i := sort.Search(len(g.iv), func(i int) bool { return g.iv[i].start > t }) - 1
	if i < 0 || g.iv[i].end != 0 && g.iv[i].end < t {
		return -1
	}
	return i
}

func (a *analysis) breakdown() *Breakdown {
	b := &Breakdown{Config: a.cfg, TraceSpan: time.Duration(a.last - a.first), Workers: len(a.workers), STWs: len(a.stw), GCs: a.gcs}
	for _, s := range a.stw {
		b.STWMax = max(b.STWMax, time.Duration(s.end-s.start))
	}
	for _, p := range a.probes {
		if p.seq == 0 || p.end == 0 {
			continue
		}
		b.Traced++
		if _, ok := a.cfg.Client[p.seq]; !ok {
			continue
		}
		b.Matched++
		if p.slow {
			b.Slow++
		}
		req, ok := a.follow(p)
		switch {
		case !ok && p.slow:
			b.Incomplete++
		case !ok:
		case p.slow:
			b.Requests = append(b.Requests, req)
			fallthrough
		default:
			b.Followed++
			for c, d := range req.Parts {
				b.AllParts[c] += d
			}
		}
	}
	slices.SortFunc(b.Requests, func(x, y Request) int { return int(y.Latency - x.Latency) })
	return b
}

// follow builds a slow request's breakdown; false if its span cannot be
// followed in the trace.
func (a *analysis) follow(p *probe) (Request, bool) {
	c := a.cfg.Client[p.seq]
	req := Request{Seq: p.seq, Latency: c.Latency}
	h := a.track[p.g]
	bi := h.at(p.begin)
	if bi < 0 {
		return req, false
	}
	// The span starts where the handler goroutine last stopped waiting
	// before the task began: the poller made it runnable.
	start := p.begin
	for i := bi; i >= 0; i-- {
		if h.iv[i].state == xtrace.GoWaiting {
			start = h.iv[i].end
			break
		}
		if i == 0 {
			return req, false // never seen waiting: begun before the trace
		}
	}
	// It ends when the goroutine waits again after the task ended: the
	// response has been written and it reads the next request.
	end := xtrace.Time(0)
	for i := h.at(p.end); i >= 0 && i < len(h.iv); i++ {
		if h.iv[i].state == xtrace.GoWaiting || h.iv[i].state == xtrace.GoNotExist {
			end = h.iv[i].start
			break
		}
	}
	if end == 0 {
		end = p.end
	}
	req.Span = time.Duration(end - start)
	if a.clock != nil && !c.Sent.IsZero() {
		req.Parts[CauseClientLate] = max(0, c.Latency-c.Done.Sub(c.Sent))
		req.Parts[CauseInbound] = max(0, a.wall(start).Sub(c.Sent))
		req.Parts[CauseOutbound] = max(0, c.Done.Sub(a.wall(end)))
	} else if out := req.Latency - req.Span; out > 0 {
		req.Parts[CauseOutside] = out
	}

	var sl *gor
	var sleepDue xtrace.Time
	if p.sleeper != xtrace.NoGoroutine && p.sleeper != 0 {
		sl = a.track[p.sleeper]
		for _, iv := range sl.iv {
			if iv.state == xtrace.GoRunning {
				// The sleeper starts its timer as it first runs, on
				// this P's timer heap.
				sleepDue = iv.start + xtrace.Time(a.cfg.Sleep)
				a.timerP = iv.proc
				break
			}
		}
	}
	for _, iv := range h.iv {
		s, e := iv.clip(start, end)
		if s >= e {
			continue
		}
		if iv.state == xtrace.GoWaiting && sl != nil {
			// The handler waits for the sleeper: follow the sleeper.
			a.charge(&req, sl, "sleeper", s, e, sleepDue)
			continue
		}
		a.chargeInterval(&req, h, "handler", iv, s, e, 0)
	}
	for c := range numCauses {
		if c != CauseSleep && req.Parts[c] > req.Parts[req.Main] {
			req.Main = c
		}
	}
	return req, true
}

// charge charges [s, e) of goroutine g's history.
func (a *analysis) charge(req *Request, g *gor, who string, s, e, sleepDue xtrace.Time) {
	covered := s
	for _, iv := range g.iv {
		is, ie := iv.clip(s, e)
		if is >= ie {
			continue
		}
		if is > covered {
			req.Parts[CauseBlocked] += time.Duration(is - covered) // not yet created
		}
		a.chargeInterval(req, g, who, iv, is, ie, sleepDue)
		covered = ie
	}
	if covered < e {
		// The sleeper has exited; the handler is waiting to be woken
		// (charged on its own Runnable stretch) or for something else.
		req.Parts[CauseBlocked] += time.Duration(e - covered)
	}
}

// chargeInterval charges [s, e) of interval iv of goroutine g.
func (a *analysis) chargeInterval(req *Request, g *gor, who string, iv interval, s, e, sleepDue xtrace.Time) {
	stw := overlap(a.stw, s, e)
	req.Parts[CauseGCStop] += stw
	d := time.Duration(e-s) - stw
	switch iv.state {
	case xtrace.GoRunning:
		as := overlap(g.assists, s, e)
		req.Parts[CauseGCAssist] += as
		req.Parts[CauseRunning] += d - as
	case xtrace.GoSyscall:
		req.Parts[CauseSyscall] += d
	case xtrace.GoRunnable:
		w := a.census(iv, who)
		w.Dur = d
		req.Parts[w.Cause] += d
		if d > 50*time.Microsecond {
			req.Waits = append(req.Waits, w)
		}
	case xtrace.GoWaiting:
		if sleepDue == 0 {
			req.Parts[CauseBlocked] += d
			return
		}
		// Before the due time it is the sleep; after it, the timer is
		// late, charged by what held the timer's P at the due time.
		onTime := min(e, max(s, sleepDue)) - s
		req.Parts[CauseSleep] += min(d, time.Duration(onTime))
		late := CauseTimerLate
		if l := a.procs[a.timerP]; l != nil {
			if h := a.holder(l, sleepDue); h == "worker" || h == "handoff" {
				late = CauseTimerOnWkr
			}
		}
		req.Parts[late] += max(0, d-time.Duration(onTime))
	default:
		req.Parts[CauseBlocked] += d
	}
}

// holder names what P l is held for at t: a cpusched worker goroutine,
// another goroutine, "handoff" when it runs nothing and the next thread to
// start it is a worker's (the runtime handed it to a low-priority thread
// that has not run yet: startlockedm), or nothing.
func (a *analysis) holder(l *procLine, t xtrace.Time) string {
	g := l.running(t)
	switch {
	case g == xtrace.NoGoroutine && a.workerThreads[l.nextStart(t)]:
		return "handoff"
	case g == xtrace.NoGoroutine:
		return "nothing"
	case a.workers[g]:
		return "worker"
	}
	return "other"
}

// census says what held the Ps halfway through runnable stretch iv.
func (a *analysis) census(iv interval, who string) Wait {
	w := Wait{Who: who, QueuedOn: int64(iv.proc), Holder: "-"}
	t := iv.start + (iv.end-iv.start)/2
	for id, l := range a.procs {
		holder := a.holder(l, t)
		switch holder {
		case "nothing":
			w.IdlePs++
		case "handoff":
			w.Handoffs++
		case "worker":
			w.Workers++
		default:
			w.Others++
		}
		if id == iv.proc {
			w.Holder = holder
		}
	}
	w.Stolen = iv.proc != xtrace.NoProc && iv.ranOn != xtrace.NoProc && iv.proc != iv.ranOn
	switch {
	case w.Holder == "worker" || w.Holder == "handoff":
		w.Cause = CauseRunnableOnWkr
	case w.Handoffs > 0 && w.IdlePs == 0:
		w.Cause = CauseRunnableHandoff
	case w.IdlePs == 0:
		w.Cause = CauseRunnableBusy
	default:
		w.Cause = CauseRunnableIdleP
	}
	return w
}

// overlap returns how much of [s, e) the spans cover (spans sorted and
// disjoint).
func overlap(spans []span, s, e xtrace.Time) time.Duration {
	var d time.Duration
	for _, sp := range spans {
		if sp.end == 0 {
			continue
		}
		if lo, hi := max(sp.start, s), min(sp.end, e); lo < hi {
			d += time.Duration(hi - lo)
		}
	}
	return d
}
