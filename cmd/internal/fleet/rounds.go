package fleet

// The rounds: each scenario's policies measured in turns, segment by
// segment, and each policy's segments merged into its row.

import (
	"math"

	"github.com/cpusched/cpusched/cmd/internal/bench"
)

// roundOrder returns the order of the policies (their indexes) in round:
// each round starts one policy further on, so that over as many rounds as
// there are policies each runs first, second and last alike, and a drift
// within a round favours none of them.
func roundOrder(policies, round int) []int {
	order := make([]int, policies)
	for i := range order {
		order[i] = (i + round) % policies
	}
	return order
}

// rows gathers a scenario's segments by policy, keeping only whole rounds:
// a round that an interruption cut short would compare the policies over
// different stretches of time.
type rows struct {
	done    []*segment // the merged segments of the completed rounds, by policy
	pending []*segment // this round's
	p99s    [][]float64
	rounds  int
}

func newRows(policies int) *rows {
	return &rows{done: make([]*segment, policies), pending: make([]*segment, policies), p99s: make([][]float64, policies)}
}

// add records policy pi's segment of the current round.
func (r *rows) add(pi int, seg segment) { r.pending[pi] = &seg }

// endRound merges the current round's segments into the rows, if every
// policy ran its segment; it drops them otherwise.
func (r *rows) endRound() {
	for _, s := range r.pending {
		if s == nil {
			clear(r.pending)
			return
		}
	}
	for i, s := range r.pending {
		r.p99s[i] = append(r.p99s[i], percentiles(s.rec.all)[1])
		if r.done[i] == nil {
			r.done[i] = s
		} else {
			r.done[i].merge(s)
		}
	}
	clear(r.pending)
	r.rounds++
}

// result returns policy pi's row; nil if no round was completed.
func (r *rows) result(pi int, scenario, policy string, rate float64) *Result {
	s := r.done[pi]
	if s == nil {
		return nil
	}
	res := newResult(scenario, policy, rate, s.procs, s.rec, s.w)
	res.Rounds = r.rounds
	for _, p := range r.p99s[pi] {
		res.RoundP99Ms = append(res.RoundP99Ms, optional(p))
	}
	return &res
}

// merge adds o's calls and window to s's. The replicas of both are alike
// (the same specs), so s keeps its own.
func (s *segment) merge(o *segment) {
	s.rec.merge(o.rec)
	s.w = s.w.add(o.w)
}

// merge adds o's calls to r's.
func (r *recording) merge(o *recording) {
	r.all.Merge(o.all)
	for i := range r.methods {
		m, om := &r.methods[i], &o.methods[i]
		m.hist.Merge(om.hist)
		m.calls += om.calls
		m.errors += om.errors
	}
	for i := range r.replicas {
		rr, or := &r.replicas[i], &o.replicas[i]
		rr.hist.Merge(or.hist)
		rr.calls += or.calls
		rr.errors += or.errors
		rr.reports += or.reports
		rr.app += or.app
		rr.cpu += or.cpu
		rr.heavyReports += or.heavyReports
		rr.heavyRun += or.heavyRun
		rr.heavyWait += or.heavyWait
	}
	r.unpicked += o.unpicked
	for code, n := range o.errCodes {
		r.errCodes[code] += n
	}
}

// add returns the window of w and o together: their lengths added, the
// counts summed, the rates (CPU use, the machine's busy share) weighted by
// length; a figure unknown in either is unknown.
func (w window) add(o window) window {
	total := w.seconds + o.seconds
	mean := func(a, b float64) float64 {
		if total <= 0 {
			return math.NaN()
		}
		return (a*w.seconds + b*o.seconds) / total // NaN if either is
	}
	sum := window{seconds: total, machineBusy: mean(w.machineBusy, o.machineBusy), clientCPU: mean(w.clientCPU, o.clientCPU)}
	for i := range w.cpuUsed {
		sum.cpuUsed = append(sum.cpuUsed, mean(w.cpuUsed[i], o.cpuUsed[i]))
	}
	for i := range w.batchPasses {
		sum.batchPasses = append(sum.batchPasses, w.batchPasses[i]+o.batchPasses[i])
	}
	for i := range w.neighborPasses {
		sum.neighborPasses = append(sum.neighborPasses, mean(w.neighborPasses[i], o.neighborPasses[i]))
	}
	for i := range w.throttled {
		var t *bench.CgroupCPUStat
		if a, b := w.throttled[i], o.throttled[i]; a != nil && b != nil {
			t = &bench.CgroupCPUStat{Periods: a.Periods + b.Periods, Throttled: a.Throttled + b.Throttled, ThrottledMs: a.ThrottledMs + b.ThrottledMs}
		}
		sum.throttled = append(sum.throttled, t)
	}
	return sum
}
