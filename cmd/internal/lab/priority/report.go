package priority

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// seedCPU and seedSleep are the seed's figures ("Trying priorities", 2012) for the
// rows that match its setup.
var seedCPU = map[string]string{
	Normal: "22.0 s (3rd)",
	Nice:   "13.7 s (2nd)",
	RR:     "12.9 s (1st)",
}

const seedSleep = "47-49 s (40,000 x 1 ms)"

// WhyDiffer says why our times differ from the seed's.
const WhyDiffer = `why it differs: the seed ran 3 copies of 4e9 increments on a one-CPU VPS; here up to 5 copies of a ~%v loop
  share CPU %d of this machine, so wall times scale with the number of copies; the order is the point.`

func secs(d time.Duration) string { return report.Ms(d.Seconds()) + " s" }

func ord(o int) string {
	switch o {
	case 0:
		return "-"
	case 1:
		return "1st"
	case 2:
		return "2nd"
	case 3:
		return "3rd"
	}
	return strconv.Itoa(o) + "th"
}

func osTable(w io.Writer, rows []OSRow, seed func(p string) string) error {
	t := report.NewTable("row", "setting", "wall", "cpu", "order", "seed")
	for _, r := range rows {
		if r.Skipped != "" {
			t.Row(r.Policy, "skipped: "+r.Skipped, "-", "-", "-", seed(r.Policy))
			continue
		}
		if r.Unfinished {
			t.Row(r.Policy, r.Label+" (starved: killed unfinished)", "> "+secs(r.Wall), "-", "-", seed(r.Policy))
			continue
		}
		t.Row(r.Policy, r.Label, secs(r.Wall), secs(r.CPU), ord(r.Order), seed(r.Policy))
	}
	return t.Write(w)
}

// WriteTable writes the three parts' tables with the seed's figures.
func WriteTable(w io.Writer, res *Result) error {
	alone := "calibrated to " + res.Alone.String() + " alone"
	if res.Alone == 0 {
		alone = "size given by -loops"
	}
	fmt.Fprintf(w, "CPU loops: %s iterations each (%s), started together, pinned to CPU %d\n", report.Num(float64(res.Loops)), alone, PinnedCPU)
	if err := osTable(w, res.CPULoops, func(p string) string {
		if s, ok := seedCPU[p]; ok {
			return s
		}
		return "-"
	}); err != nil {
		return err
	}
	if len(res.SleepLoops) > 0 {
		fmt.Fprintf(w, "\nsleep loops: %d x 1 ms nanosleep each (%v of sleep), pinned to CPU %d\n", res.Sleeps, time.Duration(res.Sleeps)*time.Millisecond, PinnedCPU)
		if err := osTable(w, res.SleepLoops, func(p string) string {
			if _, ok := seedCPU[p]; ok {
				return seedSleep
			}
			return "-"
		}); err != nil {
			return err
		}
	}
	if res.Tasks != nil {
		fmt.Fprintf(w, "\ncpusched: the same loops as 3 tasks on one worker, Checkpoint every %s iterations (%s preemptions)\n", report.Num(float64(res.Chunk)), report.Num(float64(res.Tasks.Preempted)))
		t := report.NewTable("task", "wall", "cpu", "share while all ran", "order", "expected")
		expected := map[string]string{"ClassRealtime": "1st (throttled to 95%)", "nice -20": "2nd", "normal": "3rd"}
		for _, r := range res.Tasks.Rows {
			t.Row(r.Name, secs(r.Wall), secs(r.CPU), report.Pct(r.Share), ord(r.Order), expected[r.Name])
		}
		if err := t.Write(w); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "\nmachine: %d CPUs, %s. seed: chrt 12.9 s, nice 13.7 s, normal 22.0 s; sleep loops 47-49 s.\n"+WhyDiffer+"\n",
		res.CPUs, res.GoVersion, res.Alone.Round(100*time.Millisecond), PinnedCPU)
	return err
}

// WritePlot writes DIR/priority.png: wall time per row for the CPU loops,
// the sleep loops and the cpusched tasks, and returns its path.
func WritePlot(dir string, res *Result) (string, error) {
	var cats []string
	var cpuV, sleepV []float64
	for i, r := range res.CPULoops {
		cats = append(cats, r.Policy)
		cpuV = append(cpuV, nanIfSkipped(r))
		if i < len(res.SleepLoops) {
			sleepV = append(sleepV, nanIfSkipped(res.SleepLoops[i]))
		}
	}
	bars := []report.Bars{{Name: "CPU loop wall (s)", Values: cpuV}}
	if len(sleepV) == len(cats) {
		bars = append(bars, report.Bars{Name: "sleep loop wall (s)", Values: sleepV})
	}
	if res.Tasks != nil {
		for _, r := range res.Tasks.Rows {
			cats = append(cats, "cpusched "+r.Name)
			for i := range bars {
				v := nan()
				if i == 0 {
					v = r.Wall.Seconds()
				}
				bars[i].Values = append(bars[i].Values, v)
			}
		}
	}
	path := filepath.Join(dir, "priority.png")
	return path, report.BarPlot(path, "priority: wall time of contending loops (lower finished sooner)", "seconds", false, cats, bars)
}

func nanIfSkipped(r OSRow) float64 {
	if r.Skipped != "" || r.Unfinished {
		return nan()
	}
	return r.Wall.Seconds()
}
