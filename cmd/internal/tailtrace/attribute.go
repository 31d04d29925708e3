// Attributing a request's time: following its span through the handler and
// the sleeper, and charging each stretch to a Cause.

package tailtrace

import (
	"slices"
	"sort"
	"time"

	xtrace "golang.org/x/exp/trace"
)

// breakdown follows every probe request with a client latency: each slow
// one into Breakdown.Requests, and every one into the baseline AllParts.
func (a *analysis) breakdown() *Breakdown {
	b := &Breakdown{Config: a.cfg, TraceSpan: time.Duration(a.last - a.first), Workers: len(a.workers), STWs: len(a.stw), GCs: a.gcs}
	for _, s := range a.stw {
		b.STWMax = max(b.STWMax, time.Duration(s.end-s.start))
		all, worker := stopWaits(a.procs, a.workers, s)
		b.STWWaitMax = max(b.STWWaitMax, all)
		b.STWWaitWorkerMax = max(b.STWWaitWorkerMax, worker)
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
			if req.ReadyBeforeSend {
				b.ReadyBeforeSend++
			}
			for c, d := range req.Parts {
				b.AllParts[c] += d
			}
			for sub, d := range req.Subs {
				b.AllSubs[sub] += d
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
	if a.clock != nil && !c.Sent.IsZero() {
		// A keep-alive connection's goroutine is woken at the end of
		// the previous response (its background read ends); if it gets
		// to read only after the next request has come, it never waits
		// for it, and the time before the send is no part of this one.
		if sent := a.traceTime(c.Sent); sent > start && sent < end {
			start, req.ReadyBeforeSend = sent, true
		}
	}
	req.Span = time.Duration(end - start)
	if a.clock != nil && !c.Sent.IsZero() {
		req.Parts[CauseClientLate] = max(0, c.Latency-c.Done.Sub(c.Sent))
		req.Parts[CauseInbound] = max(0, a.wall(start).Sub(c.Sent))
		if sent := a.traceTime(c.Sent); sent < start && a.noIdleP(sent+(start-sent)/2) {
			req.Subs[SubInboundNoIdleP] = req.Parts[CauseInbound]
		}
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
	// A keep-alive connection's goroutine serves every request of its
	// connection, thousands in a closed loop: only the intervals of this
	// span are looked at.
	for _, iv := range h.iv[h.from(start):] {
		if iv.start >= end {
			break
		}
		s, e := iv.clip(start, end)
		if s >= e {
			continue
		}
		if iv.state == xtrace.GoWaiting && sl != nil {
			// The handler waits for the sleeper: follow the sleeper.
			// If it waits in the collector instead, what that charges
			// as blocked (the sleeper gone) was the collector's.
			blocked := req.Parts[CauseBlocked]
			a.charge(&req, sl, "sleeper", s, e, sleepDue)
			if iv.gcWait {
				req.Subs[SubBlockedGC] += req.Parts[CauseBlocked] - blocked
			}
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
		if w.Cause == CauseRunnableBusy && w.Workers > 0 {
			req.Subs[SubBusyWorkers] += d
		}
		if d > 50*time.Microsecond {
			req.Waits = append(req.Waits, w)
		}
	case xtrace.GoWaiting:
		if sleepDue == 0 {
			req.Parts[CauseBlocked] += d
			if iv.gcWait {
				req.Subs[SubBlockedGC] += d
			}
			return
		}
		// Before the due time it is the sleep; after it, the timer is
		// late, charged by what held the timer's P at the due time.
		onTime := min(e, max(s, sleepDue)) - s
		req.Parts[CauseSleep] += min(d, time.Duration(onTime))
		late, lateBy := CauseTimerLate, max(0, d-time.Duration(onTime))
		if l := a.procs[a.timerP]; l != nil {
			switch a.holder(l, sleepDue) {
			case "worker", "handoff":
				late = CauseTimerOnWkr
			case "nothing":
				req.Subs[SubTimerIdleP] += lateBy
			}
		}
		req.Parts[late] += lateBy
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

// noIdleP reports whether every P ran a goroutine or was being handed
// to a worker's thread at t.
func (a *analysis) noIdleP(t xtrace.Time) bool {
	for _, l := range a.procs {
		if a.holder(l, t) == "nothing" {
			return false
		}
	}
	return len(a.procs) > 0
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

// stopWaits returns the longest wait of stop-the-world s for a P to stop:
// for each P that ran a goroutine as s began, until that goroutine left
// it within s, over every such P (all) and over those whose goroutine was
// a cpusched worker (worker). The P of the goroutine that stopped the
// world keeps it to the end, and is not counted.
func stopWaits(procs map[xtrace.ProcID]*procLine, workers map[xtrace.GoID]bool, s span) (all, worker time.Duration) {
	for _, l := range procs {
		g := l.running(s.start)
		if g == xtrace.NoGoroutine {
			continue
		}
		i := sort.Search(len(l.at), func(i int) bool { return l.at[i] > s.start })
		if i == len(l.at) || l.at[i] > s.end {
			continue
		}
		d := time.Duration(l.at[i] - s.start)
		all = max(all, d)
		if workers[g] {
			worker = max(worker, d)
		}
	}
	return all, worker
}
