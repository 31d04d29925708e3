package switchcost

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// SeedFigures is the seed's own result ("Goroutines don't scale", 2017), printed under
// the table.
const SeedFigures = `seed, 100 clients, 16 cores: busy 100% usr; gosched buf 0 ~17% usr, ~43% sys, ~39% iowait, ~700k cs/s;
  gosched buf 1000 ~99% usr; chan (either buffer) ~20% usr, ~42% sys, ~35-40% iowait, ~710k cs/s.
seed, 4 cores: all three ~95-100% busy (gosched buf 0: 70% usr / 26% sys, 148k cs/s).`

// WhyDiffer is the line on why a machine with fewer cores than the seed's
// differs; %d is this machine's CPU count.
const WhyDiffer = `why it differs: with %d cores there are few idle Ps whose Ms park and wake in futex
  (the sys and iowait of 16 cores); the cost grows with the core count, as the seed found going from 16 to 4.`

// WriteTable writes one row per cell, then the seed's figures and why ours
// differ.
func WriteTable(w io.Writer, res *Result) error {
	t := report.NewTable("workload", "procs", "buffer", "usr", "sys", "idle", "iowait", "cs/s", "proc vol/s", "proc invol/s", "proc cpu", "ops/s", "ops/cpu-s", "note")
	for _, c := range res.Cells {
		if c.Skipped != "" {
			t.Row(c.Workload, strconv.Itoa(c.Procs), bufferLabel(c.Buffer), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "skipped: "+c.Skipped)
			continue
		}
		t.Row(c.Workload, strconv.Itoa(c.Procs), bufferLabel(c.Buffer),
			report.Pct(c.Usr), report.Pct(c.Sys), report.Pct(c.Idle), report.Pct(c.IOWait),
			report.Num(math.Round(c.CtxPerSec)), report.Num(math.Round(c.VolPerSec)), report.Num(math.Round(c.InvolPerSec)),
			report.Pct(c.ProcCPUPercent), report.Num(math.Round(c.OpsPerSec)), report.Num(math.Round(c.OpsPerCPUSec)), "")
	}
	if err := t.Write(w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "\nmachine: %d CPUs, %s, %v per cell; usr/sys/idle/iowait/cs/s are the whole machine's\n  (anything else running shows up in them); proc = the child (getrusage, all threads); ops/cpu-s = ops per second of the child's CPU time.\n%s\n%s\n",
		res.CPUs, res.GoVersion, res.Duration, SeedFigures, fmt.Sprintf(WhyDiffer, res.CPUs))
	return err
}

// seriesName names a line of the plots: the workload and, if it uses one,
// the buffer.
func seriesName(c Cell) string {
	if c.Buffer < 0 {
		return c.Workload
	}
	return fmt.Sprintf("%s buf %d", c.Workload, c.Buffer)
}

// series groups the cells into one line per workload and buffer, with
// value(c) against procs.
func series(res *Result, value func(Cell) float64) []report.Series {
	var out []report.Series
	index := map[string]int{}
	for _, c := range res.Cells {
		if c.Skipped != "" {
			continue
		}
		name := seriesName(c)
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, report.Series{Name: name})
		}
		out[i].X = append(out[i].X, float64(c.Procs))
		out[i].Y = append(out[i].Y, value(c))
	}
	return out
}

// WritePlots writes DIR/switch-ops.png (ops/s against procs, log scale) and
// DIR/switch-sys.png (sys % against procs) and DIR/switch-ops-per-cpu.png
// (ops per CPU-second of the child, which other processes disturb less) and
// returns their paths.
func WritePlots(dir string, res *Result) ([]string, error) {
	ops := filepath.Join(dir, "switch-ops.png")
	if err := report.LinePlot(ops, "goroutine switching: operations per second", "GOMAXPROCS", "ops/s", true,
		series(res, func(c Cell) float64 { return c.OpsPerSec })); err != nil {
		return nil, err
	}
	sys := filepath.Join(dir, "switch-sys.png")
	if err := report.LinePlot(sys, "goroutine switching: system CPU (% of machine)", "GOMAXPROCS", "sys %", false,
		series(res, func(c Cell) float64 { return c.Sys })); err != nil {
		return nil, err
	}
	perCPU := filepath.Join(dir, "switch-ops-per-cpu.png")
	if err := report.LinePlot(perCPU, "goroutine switching: operations per second of the child's CPU time", "GOMAXPROCS", "ops per CPU-second", true,
		series(res, func(c Cell) float64 { return c.OpsPerCPUSec })); err != nil {
		return nil, err
	}
	return []string{ops, sys, perCPU}, nil
}
