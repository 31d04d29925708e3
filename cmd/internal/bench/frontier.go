package bench

import (
	"fmt"
	"slices"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// frontierSteps are the steps the frontier plot shows: the probe beside
// the CPU load, with and without Checkpoints, and the busy fast path.
var frontierSteps = []string{StepHogSched, StepHogNoCkpt, StepIOHeavy}

// WriteFrontier draws, to path, each mode's trade-off at the steps that
// have a floor to compare with: its p99 as a multiple of the floor's
// (y, log scale) against its CPU-heavy throughput as a share of direct
// (x), one point per mode and step, with the floor's own points at y = 1.
// A setting up and to the left of another protects the probe worse for
// less throughput. It fails, writing nothing, when no row has both
// figures (a run without the floor, or without hog-direct).
func (r *Report) WriteFrontier(path string) error {
	var series []report.Series
	for _, row := range r.Results {
		if !slices.Contains(frontierSteps, row.Step) || row.Hog == nil || row.Hog.PctOfDirect == nil {
			continue
		}
		y := 1.0
		switch {
		case row.VsFloor != nil:
			y = row.VsFloor.P99X
		case row.Mode != ModeFloor:
			continue
		}
		series = append(series, report.Series{
			Name: row.Mode + " " + row.Step,
			X:    []float64{*row.Hog.PctOfDirect},
			Y:    []float64{y},
		})
	}
	if len(series) == 0 {
		return fmt.Errorf("bench: no step with a floor and a throughput to plot")
	}
	m := r.Machine
	title := fmt.Sprintf("cpusched bench: p99 against throughput, each step beside the floor (%d CPUs, %s)", m.CPUs, m.Go)
	return report.LinePlot(path, title, "CPU-heavy throughput, % of direct", "probe p99, x the floor's (io-heavy: closed loop)", true, series)
}
