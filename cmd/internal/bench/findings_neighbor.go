// The summary lines of the steps beside the neighbour.

package bench

import (
	"fmt"

	"github.com/cpusched/cpusched"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// floorNeighborFindings returns the floor's neighbour line: the probe
// beside the neighbour alone and with the SCHED_IDLE hog too, the hog's
// and the neighbour's throughput, and the GC's longest pause; none without
// its neighbor row.
func (r *Report) floorNeighborFindings() []string {
	nb := r.find(ModeFloor, StepNeighbor)
	if nb == nil || nb.Probe == nil {
		return nil
	}
	s := fmt.Sprintf("beside the neighbour: probe p99 %s ms with the SCHED_IDLE hog", report.Ms(nb.Probe.P99Ms))
	if alone := r.find(ModeFloor, StepNeighborAlone); alone != nil && alone.Probe != nil {
		s += fmt.Sprintf(" (%s the neighbour alone's %s ms)", times(nb.Probe.P99Ms, alone.Probe.P99Ms), report.Ms(alone.Probe.P99Ms))
	}
	if nb.Hog != nil {
		s += fmt.Sprintf(", which made %s passes/s", report.Num(nb.Hog.PassesPerS))
	}
	return []string{s + gcAndNeighbor(nb)}
}

// neighborFindings returns an isolation mode's line for step (neighbor or
// neighbor-nockpt), or "": the probe's p99 against the floor's, the hog's
// passes against the floor's and reserve's in the same step, the small
// requests' p99 against reserve's, the GC's longest pause against the
// floor's.
func (r *Report) neighborFindings(mode, step string) string {
	nb := r.find(mode, step)
	if nb == nil || nb.Probe == nil {
		return ""
	}
	reserve := r.find(cpusched.IsolationReserve.String(), step)
	if mode == cpusched.IsolationReserve.String() {
		reserve = nil // itself
	}
	what := "beside the neighbour"
	if step == StepNeighborNoCkpt {
		what += ", the tasks without a Checkpoint"
	}
	s := fmt.Sprintf("%s: probe p99 %s ms%s", what, report.Ms(nb.Probe.P99Ms), inParens(vsFloor(nb)))
	if h := nb.Hog; h != nil {
		s += fmt.Sprintf(", the hog at %s passes/s%s", report.Num(h.PassesPerS), ofFloor(nb))
		if reserve != nil && reserve.Hog != nil && reserve.Hog.PassesPerS > 0 {
			s += fmt.Sprintf(", %s of reserve's", report.Pct(h.PassesPerS/reserve.Hog.PassesPerS*100))
		}
	}
	if sm := nb.Small; sm != nil {
		s += fmt.Sprintf("; small requests p99 %s ms", report.Ms(sm.P99Ms))
		if reserve != nil && reserve.Small != nil {
			s += fmt.Sprintf(" (%s reserve's %s ms)", times(sm.P99Ms, reserve.Small.P99Ms), report.Ms(reserve.Small.P99Ms))
		}
	}
	s += gcAndNeighbor(nb)
	if f := r.find(ModeFloor, StepNeighbor); f != nil && f.GC != nil && nb.GC != nil && f.GC.PauseMaxMs > 0 && nb.GC.PauseMaxMs > 0 {
		s += fmt.Sprintf(" (%s the floor's %s ms)", times(nb.GC.PauseMaxMs, f.GC.PauseMaxMs), report.Ms(f.GC.PauseMaxMs))
	}
	return s
}

// gcAndNeighbor returns "; the neighbour 12,345 passes/s; GC pauses up to
// 1.20 ms" for a row beside the neighbour.
func gcAndNeighbor(row *Result) string {
	s := ""
	if n := row.Neighbor; n != nil {
		s += fmt.Sprintf("; the neighbour %s passes/s", report.Num(n.PassesPerS))
		if n.TailAfterPause > 0 {
			s += fmt.Sprintf(" (%s in the tail when the window closed ended only after it was paused: the tail is a lower bound)", plural(n.TailAfterPause, "request"))
		}
	}
	if g := row.GC; g != nil {
		s += fmt.Sprintf("; GC pauses up to %s ms", report.Ms(g.PauseMaxMs))
	}
	return s
}

// plural returns "1 request" or "3 requests".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
