package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/internal/lab/sleep"
	"github.com/cpusched/cpusched/internal/report"
)

// sleepBudget is the default -budget: the sweep's estimated time is kept
// under it by trimming -outer. It is well under 2 minutes because the
// estimate ran low on the shared 2-core machine (docs/performance.md,
// "Tools"), child start-up and contention with other processes not counted.
const sleepBudget = 75 * time.Second

// sleepSeed is the seed's figures ("High CPU usage of scheduler?", LKML 2012, RHEL 6 with highres
// timers, `test_sleep 1000 10000 300 4`): avg us per iteration by threads.
var sleepSeed = map[int]string{4: "3,152 (sd 15)", 8: "4,408", 40: "9,057"}

// runLabSleep is `cpusched lab sleep [flags]`.
func runLabSleep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab sleep", stderr)
	sleepD := fs.Duration("sleep", sleep.DefaultSleep, "wait per iteration")
	outer := fs.Int("outer", sleep.DefaultOuter, "iterations per worker (trimmed to fit -budget)")
	inner := fs.Int("inner", sleep.DefaultInner, "work units per iteration")
	workKiB := fs.Int("work", sleep.DefaultWorkKiB, "KiB summed per work unit")
	threads := fs.String("threads", "", "comma-separated worker counts (default powers of 2 up to 4x CPUs)")
	methods := fs.String("methods", strings.Join(sleep.Methods, ","), "comma-separated wait methods: "+strings.Join(sleep.Methods, ", "))
	modes := fs.String("modes", strings.Join(sleep.Modes, ","), "comma-separated modes: goroutine, locked")
	quick := fs.Bool("quick", false, fmt.Sprintf("short run: -outer %d (under 20 s)", sleep.QuickOuter))
	budget := fs.Duration("budget", sleepBudget, "trim -outer so the estimated sweep fits; 0 disables")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", "write sleep.json and avg-vs-threads PNG plots into this directory")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q", fs.Args())
	}
	cfg := sleep.Config{Sleep: *sleepD, Outer: *outer, Inner: *inner, WorkKiB: *workKiB,
		Methods: labSplit(*methods), Modes: labSplit(*modes)}
	if *quick && !labFlagGiven(fs, "outer") {
		cfg.Outer = sleep.QuickOuter
	}
	if *threads == "" {
		cfg.Threads = sleep.DefaultThreads(runtime.NumCPU())
	} else {
		for _, s := range labSplit(*threads) {
			n, err := strconv.Atoi(s)
			if err != nil {
				return usagef("-threads: %q is not a count (want e.g. 1,2,4,8)", s)
			}
			cfg.Threads = append(cfg.Threads, n)
		}
	}
	if *budget < 0 {
		return usagef("-budget must be >= 0, got %v", *budget)
	}
	if err := cfg.Validate(); err != nil {
		return usagef("%v", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cfg.Exe = exe

	workPer := sleep.MeasureWork(cfg.Inner, cfg.WorkKiB)
	est := cfg.Estimate(workPer, runtime.NumCPU(), 30*time.Millisecond)
	if *budget > 0 && est > *budget {
		was := cfg.Outer
		for cfg.Outer > 1 && cfg.Estimate(workPer, runtime.NumCPU(), 30*time.Millisecond) > *budget {
			cfg.Outer = cfg.Outer * 3 / 4
		}
		fmt.Fprintf(stderr, "lab sleep: estimated %.0fs at -outer %d; trimmed -outer to %d to stay under -budget %v (-budget 0 keeps it)\n",
			est.Seconds(), was, cfg.Outer, *budget)
		est = cfg.Estimate(workPer, runtime.NumCPU(), 30*time.Millisecond)
	}
	cells := len(cfg.Cells())
	fmt.Fprintf(stderr, "lab sleep: %d cells, one work iteration = %v on one CPU, estimated %.0fs\n", cells, workPer.Round(time.Microsecond), est.Seconds())
	prog := report.NewProgress(stderr)
	start := time.Now()
	cfg.Progress = func(i, n int, c sleep.CellConfig) {
		prog.Set("lab sleep: cell %d/%d  %s %s %d threads  (%s elapsed)", i+1, n, c.Mode, c.Method, c.Threads, time.Since(start).Round(time.Second))
	}
	results, err := sleep.Run(ctx, cfg)
	prog.Done()
	if err != nil {
		return err
	}
	out := sleepOutput{Sleep: cfg.Sleep.String(), Outer: cfg.Outer, Inner: cfg.Inner, WorkKiB: cfg.WorkKiB,
		CPUs: runtime.NumCPU(), WorkPerIterUs: float64(workPer.Nanoseconds()) / 1e3, Cells: results}
	total := time.Since(start)
	if err := labWriteOutputs(out, *jsonPath, *outDir, "sleep.json", stdout, func(w io.Writer) error {
		writeSleepTable(w, cfg, results)
		_, err := fmt.Fprintf(w, "\ntotal %.1fs; %d CPUs; work per iteration %.0f us on one CPU (inner %d x %d KiB)\n",
			total.Seconds(), runtime.NumCPU(), out.WorkPerIterUs, cfg.Inner, cfg.WorkKiB)
		return err
	}); err != nil {
		return err
	}
	if *outDir != "" {
		for _, mode := range cfg.Modes {
			path := filepath.Join(*outDir, "sleep-"+mode+".png")
			if err := plotSleep(path, mode, cfg, results); err != nil {
				return err
			}
			if *jsonPath != "-" {
				fmt.Fprintf(stdout, "wrote %s\n", path)
			}
		}
	}
	return nil
}

// sleepOutput is the -json document of lab sleep.
type sleepOutput struct {
	Sleep         string             `json:"sleep"`
	Outer         int                `json:"outer"`
	Inner         int                `json:"inner"`
	WorkKiB       int                `json:"work_kib"`
	CPUs          int                `json:"cpus"`
	WorkPerIterUs float64            `json:"work_per_iter_us"`
	Cells         []sleep.CellResult `json:"cells"`
}

func writeSleepTable(w io.Writer, cfg sleep.Config, results []sleep.CellResult) {
	t := report.NewTable("mode", "method", "threads", "iters", "min us", "avg us", "max us", "stddev us", "user us/it", "sys us/it", "seed avg us")
	for _, r := range results {
		seed := ""
		if r.Method == "nanosleep" && r.Mode == "locked" {
			seed = sleepSeed[r.Threads]
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

func plotSleep(path, mode string, cfg sleep.Config, results []sleep.CellResult) error {
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
		return nil
	}
	title := fmt.Sprintf("lab sleep (%s): avg wall time per iteration, sleep %v, %d CPUs", mode, cfg.Sleep, runtime.NumCPU())
	return report.LinePlot(path, title, "threads", "avg us per iteration", false, series)
}

// childLabSleep is `cpusched lab-child sleep FLAGS`: one cell, one JSON line.
func childLabSleep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab-child sleep", stderr)
	var c sleep.CellConfig
	fs.StringVar(&c.Method, "method", "none", "wait method")
	fs.StringVar(&c.Mode, "mode", "goroutine", "goroutine or locked")
	fs.IntVar(&c.Threads, "threads", 1, "workers")
	fs.DurationVar(&c.Sleep, "sleep", sleep.DefaultSleep, "wait per iteration")
	fs.IntVar(&c.Outer, "outer", sleep.DefaultOuter, "iterations per worker")
	fs.IntVar(&c.Inner, "inner", sleep.DefaultInner, "work units per iteration")
	fs.IntVar(&c.WorkKiB, "work", sleep.DefaultWorkKiB, "KiB per work unit")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return usagef("%v", err)
	}
	r, err := sleep.RunCell(ctx, c)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(r)
}

// labSplit splits a comma-separated flag value, dropping empty items.
func labSplit(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// labFlagGiven reports whether the flag name was given on the command line.
func labFlagGiven(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			found = true
		}
	})
	return found
}
