package sleep

import (
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Result is a whole sweep: the -json document of `cpusched lab sleep`.
type Result struct {
	Sleep         string       `json:"sleep"`
	Outer         int          `json:"outer"`
	Inner         int          `json:"inner"`
	WorkKiB       int          `json:"work_kib"`
	CPUs          int          `json:"cpus"`
	WorkPerIterUs float64      `json:"work_per_iter_us"`
	Cells         []CellResult `json:"cells"`
}

// seedFigures are the seed's figures ("High CPU usage of scheduler?", LKML
// 2012, RHEL 6 with highres timers, `test_sleep 1000 10000 300 4`): avg us
// per iteration by threads.
var seedFigures = map[int]string{4: "3,152 (sd 15)", 8: "4,408", 40: "9,057"}

// writeTable writes one row per cell and the seed's figures.
func writeTable(w io.Writer, results []CellResult) {
	t := report.NewTable("mode", "method", "threads", "iters", "min us", "avg us", "max us", "stddev us", "user us/it", "sys us/it", "seed avg us")
	for _, r := range results {
		seed := ""
		if r.Method == "nanosleep" && r.Mode == "locked" {
			seed = seedFigures[r.Threads]
		}
		if r.Skipped != "" {
			t.Row(r.Mode, r.Method, report.Num(float64(r.Threads)), r.Skipped)
			continue
		}
		t.Row(r.Mode, r.Method, report.Num(float64(r.Threads)), report.Num(float64(r.Iterations)),
			report.Ms(r.MinUs), report.Ms(r.AvgUs), report.Ms(r.MaxUs), report.Ms(r.StddevUs),
			report.Ms(r.UserUs), report.Ms(r.SysUs), seed)
	}
	t.Write(w)
	fmt.Fprintln(w, "\nseed ('High CPU usage of scheduler?', LKML 2012, RHEL 6 highres timers, `test_sleep 1000 10000 300 4`, threads sleeping in nanosleep/usleep):")
	fmt.Fprintln(w, "  4 threads 3,152 us avg per iteration (stddev 15 us), 8 threads 4,408 us, 40 threads 9,057 us.")
	fmt.Fprintln(w, "  Ours differ: our work per iteration is calibrated by this machine's CPU (see below), there 300 x 4 KiB took ~2.1 ms;")
	fmt.Fprintf(w, "  and this machine has %d CPUs, so the work queues up once the threads outnumber them.\n", runtime.NumCPU())
}

// writePlots writes DIR/sleep-MODE.png for each mode that has a measured
// cell, avg time per iteration against threads by method, and returns the
// paths written.
func writePlots(dir string, cfg Config, results []CellResult) ([]string, error) {
	var paths []string
	for _, mode := range cfg.Modes {
		var series []report.Series
		for _, m := range cfg.Methods {
			s := report.Series{Name: m}
			for _, r := range results {
				if r.Mode == mode && r.Method == m && r.Skipped == "" {
					s.X = append(s.X, float64(r.Threads))
					s.Y = append(s.Y, r.AvgUs)
				}
			}
			if len(s.X) > 0 {
				series = append(series, s)
			}
		}
		if len(series) == 0 {
			continue
		}
		path := filepath.Join(dir, "sleep-"+mode+".png")
		title := fmt.Sprintf("lab sleep (%s): avg wall time per iteration, sleep %v, %d CPUs", mode, cfg.Sleep, runtime.NumCPU())
		if err := report.LinePlot(path, title, "threads", "avg us per iteration", false, series); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}
