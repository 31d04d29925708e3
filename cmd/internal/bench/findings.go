// The summary lines after the table: per mode, the probe's tail across
// steps, against idle and against the floor.

package bench

import (
	"fmt"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// findings returns the summary lines, in the order of Config.Modes: the
// floor's own line (or why it was skipped), and for every other mode the
// probe's tail idle, under the direct and the scheduled CPU load, without
// Checkpoint, with small requests and in io-heavy, each beside the floor.
func (r *Report) findings() []string {
	var lines []string
	for _, mode := range r.Config.Modes {
		var add []string
		if mode == ModeFloor {
			add = r.floorFindings()
		} else {
			add = r.modeFindings(mode)
		}
		for _, l := range add {
			lines = append(lines, mode+": "+l+"\n")
		}
	}
	return lines
}

// floorFindings returns the floor's line: the probe idle and beside the
// SCHED_IDLE hog, that hog's throughput, and io-heavy; or why the floor
// was skipped.
func (r *Report) floorFindings() []string {
	for _, s := range r.Skipped {
		if s.Mode == ModeFloor {
			return []string{"skipped (" + s.Reason + "), so no ratio to the floor in this run"}
		}
	}
	idle, hog := r.find(ModeFloor, StepIdle), r.find(ModeFloor, StepHogSched)
	if idle == nil || hog == nil || idle.Probe == nil || hog.Probe == nil {
		return r.floorNeighborFindings()
	}
	s := fmt.Sprintf("probe p99 %s ms idle, %s ms beside the same CPU work in a separate SCHED_IDLE process (%s idle)",
		report.Ms(idle.Probe.P99Ms), report.Ms(hog.Probe.P99Ms), times(hog.Probe.P99Ms, idle.Probe.P99Ms))
	if h := hog.Hog; h != nil {
		s += fmt.Sprintf(", which made %s passes/s", report.Num(h.PassesPerS))
		if h.PctOfDirect != nil {
			s += fmt.Sprintf(" (%s of %s)", report.Pct(*h.PctOfDirect), h.DirectRef)
		}
	}
	if io := r.find(ModeFloor, StepIOHeavy); io != nil && io.Probe != nil {
		s += fmt.Sprintf("; io-heavy p99 %s ms at %s req/s", report.Ms(io.Probe.P99Ms), report.Num(io.Probe.RPS))
	}
	return append([]string{s}, r.floorNeighborFindings()...)
}

// modeFindings returns the lines of an isolation mode: each needs the rows
// it speaks of, and leaves out the floor's ratio where there is none.
func (r *Report) modeFindings(mode string) []string {
	var lines []string
	idle, direct := r.find(mode, StepIdle), r.find(mode, StepHogDirect)
	if idle != nil && direct != nil && idle.Probe != nil && direct.Probe != nil {
		s := fmt.Sprintf("probe p99 %s ms idle%s, %s ms under the direct CPU load (%s idle)",
			report.Ms(idle.Probe.P99Ms), inParens(vsFloor(idle)), report.Ms(direct.Probe.P99Ms), times(direct.Probe.P99Ms, idle.Probe.P99Ms))
		if sched := r.find(mode, StepHogSched); sched != nil && sched.Probe != nil {
			s += fmt.Sprintf(", %s ms with that load through cpusched (%s hog-direct%s)%s",
				report.Ms(sched.Probe.P99Ms), times(sched.Probe.P99Ms, direct.Probe.P99Ms), andFloor(sched), throughput(sched))
		}
		lines = append(lines, s)
	}
	if nc := r.find(mode, StepHogNoCkpt); nc != nil && nc.Probe != nil {
		lines = append(lines, fmt.Sprintf("probe p99 %s ms with that load through cpusched without a Checkpoint%s%s",
			report.Ms(nc.Probe.P99Ms), inParens(vsFloor(nc)), throughput(nc)))
	}
	if l := autoFindings(r.find(mode, StepAuto)); l != "" {
		lines = append(lines, l)
	}
	if sm := r.find(mode, StepHogSchedSm); sm != nil && sm.Small != nil && sm.SmallDirect != nil {
		s := fmt.Sprintf("small requests p99 %s ms through cpusched, %s ms run directly at the same rate (%s direct)",
			report.Ms(sm.Small.P99Ms), report.Ms(sm.SmallDirect.P99Ms), times(sm.Small.P99Ms, sm.SmallDirect.P99Ms))
		if w := sm.Small.WaitedP99Ms; w != nil {
			s += fmt.Sprintf("; the scheduler's own wait p99 %s ms", report.Ms(*w))
		}
		lines = append(lines, s)
	}
	if io := r.find(mode, StepIOHeavy); io != nil && io.Probe != nil {
		s := fmt.Sprintf("io-heavy (closed loop, %d connections) p99 %s ms%s, %s req/s",
			io.Probe.Connections, report.Ms(io.Probe.P99Ms), inParens(vsFloor(io)), report.Num(io.Probe.RPS))
		if v := io.VsFloor; v != nil {
			s += fmt.Sprintf(" (%s of the floor's)", report.Pct(v.RPSPct))
		}
		lines = append(lines, s+", beside the load through cpusched"+throughput(io)+ofFloor(io))
	}
	for _, step := range []string{StepNeighbor, StepNeighborNoCkpt} {
		if l := r.neighborFindings(mode, step); l != "" {
			lines = append(lines, l)
		}
	}
	if l := r.contendedFindings(mode); l != "" {
		lines = append(lines, l)
	}
	if l := r.contentionCauses(mode); l != "" {
		lines = append(lines, l)
	}
	return lines
}

// vsFloor returns "1.21x the floor" for a row compared with the floor
// ("1.21x the floor's hog-sched" where the floor's step is another), or
// "" for none.
func vsFloor(row *Result) string {
	v := row.VsFloor
	if v == nil {
		return ""
	}
	s := report.Ms(v.P99X) + "x the floor"
	if v.Step != row.Step {
		s += "'s " + v.Step
	}
	return s
}

// inParens returns " (s)", or "" for an empty s.
func inParens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// andFloor returns "; s" for the floor's ratio s of row, or "".
func andFloor(row *Result) string {
	if s := vsFloor(row); s != "" {
		return "; " + s
	}
	return ""
}

// ofFloor returns " (82% of the floor's)" for a hog row's share of the
// floor's hog, or "".
func ofFloor(row *Result) string {
	if row.Hog == nil || row.Hog.PctOfFloor == nil {
		return ""
	}
	return fmt.Sprintf(" (%s of the floor's)", report.Pct(*row.Hog.PctOfFloor))
}

// throughput returns " at 95% of its throughput" for a hog row's share of
// direct, or "".
func throughput(row *Result) string {
	if row.Hog == nil || row.Hog.PctOfDirect == nil {
		return ""
	}
	return fmt.Sprintf(" at %s of its throughput", report.Pct(*row.Hog.PctOfDirect))
}
