package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// frontierSteps are the steps the frontier plot shows: the probe beside
// the CPU load, with and without Checkpoints, the busy fast path, beside
// the neighbour, and the CPU load found heavy by httpsched.Auto.
var frontierSteps = []string{StepHogSched, StepHogNoCkpt, StepIOHeavy, StepNeighbor, StepAuto}

// FrontierSteps returns the steps a frontier plot can show.
func FrontierSteps() []string { return slices.Clone(frontierSteps) }

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

// FrontierSetting is one setting of a frontier drawn from several bench
// runs: its name and the reports of its runs (bench -json, or -out's
// bench.json), each run with its own floor.
type FrontierSetting struct {
	Name string
	Runs []*Report
}

// WriteFrontierOf draws, to path, the settings' trade-offs at step (one of
// hog-sched, hog-nockpt, io-heavy, neighbor, auto): for every run, each mode's p99 over
// that run's floor (y, log scale) against its throughput as a share of
// direct (x; for runs of io-heavy or neighbor without a direct step, of
// the floor's in the same step: frontierX), and the floor's own point at
// y = 1, as WriteFrontier does for one run. A setting whose runs hold one mode besides the floor is
// named by the setting alone, otherwise "SETTING MODE" (hog-nockpt's
// and auto's floor point is the floor's hog-sched, as in the table). It fails, writing
// nothing, if step is not a frontier step or a run has no floor or no
// point at step, naming the setting and run.
func WriteFrontierOf(path, step string, settings []FrontierSetting) error {
	if !slices.Contains(frontierSteps, step) {
		return fmt.Errorf("bench: frontier step %q: want one of %v", step, frontierSteps)
	}
	floorStep := floorStepOf(step) // hog-nockpt and auto compare with the floor's hog-sched
	byFloor, xLabel := frontierX(step, settings)
	floor := report.Series{Name: "floor (each run's)"}
	var series []report.Series
	for _, set := range settings {
		modes := map[string]*report.Series{}
		var order []string
		for i, run := range set.Runs {
			found, hasFloor := false, false
			for _, row := range run.Results {
				if row.Hog == nil || row.Hog.PctOfDirect == nil && !byFloor {
					continue
				}
				if row.Mode == ModeFloor {
					if row.Step != floorStep {
						continue
					}
					hasFloor = true
					floor.X, floor.Y = append(floor.X, xOf(row, byFloor, true)), append(floor.Y, 1)
					continue
				}
				if byFloor && row.Hog.PctOfFloor == nil {
					continue
				}
				if row.Step != step || row.VsFloor == nil {
					continue
				}
				found = true
				sr := modes[row.Mode]
				if sr == nil {
					sr = &report.Series{}
					modes[row.Mode] = sr
					order = append(order, row.Mode)
				}
				sr.X, sr.Y = append(sr.X, xOf(row, byFloor, false)), append(sr.Y, row.VsFloor.P99X)
			}
			if !hasFloor || !found {
				return fmt.Errorf("bench: frontier: setting %q, run %d: no %s row of the floor and of a mode beside it, with their throughput", set.Name, i+1, step)
			}
		}
		for _, mode := range order {
			sr := modes[mode]
			sr.Name = set.Name
			if len(order) > 1 {
				sr.Name += " " + mode
			}
			series = append(series, *sr)
		}
	}
	if len(series) == 0 {
		return fmt.Errorf("bench: frontier: no settings")
	}
	series = append(series, floor)
	m := settings[0].Runs[0].Machine
	title := fmt.Sprintf("%s: p99 against throughput, each run against its floor (%d CPUs, %s)", step, m.CPUs, m.Go)
	return report.ScatterPlot(path, title, xLabel, "probe p99, x the run's floor's (io-heavy: closed loop)", true, series)
}

// frontierX is how WriteFrontierOf places a point on the x axis: the
// hog's throughput as a share of direct where every run measured a
// direct step, or else (byFloor), for io-heavy and neighbor, whose
// floor rows carry the hog's passes, as a share of the floor's in the
// same step (runs of those steps alone, without hog-direct), the floor
// at 100%.
func frontierX(step string, settings []FrontierSetting) (byFloor bool, label string) {
	if step != StepIOHeavy && step != StepNeighbor {
		return false, "CPU-heavy throughput, % of direct"
	}
	for _, set := range settings {
		for _, run := range set.Runs {
			for _, row := range run.Results {
				if row.Step == step && row.Mode != ModeFloor && row.Hog != nil && row.Hog.PctOfDirect == nil && row.Hog.PctOfFloor != nil {
					return true, "CPU-heavy throughput, % of the floor's in the same step"
				}
			}
		}
	}
	return false, "CPU-heavy throughput, % of direct"
}

// xOf is row's x (frontierX): its share of direct, or byFloor its share
// of the floor's, 100 for the floor's own row.
func xOf(row Result, byFloor, isFloor bool) float64 {
	switch {
	case !byFloor:
		return *row.Hog.PctOfDirect
	case isFloor:
		return 100
	}
	return *row.Hog.PctOfFloor
}

// ReadReport reads a report that bench wrote as JSON.
func ReadReport(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: not a bench report: %w", path, err)
	}
	if len(r.Results) == 0 {
		return nil, fmt.Errorf("%s: not a bench report: no results", path)
	}
	return &r, nil
}
