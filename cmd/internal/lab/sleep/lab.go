package sleep

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/lab"
)

// DefaultBudget is the default -budget: the sweep's estimated time is kept
// under it by trimming -outer. It is well under 2 minutes because the
// estimate ran low on the shared 2-core machine (docs/performance.md#tools),
// child start-up and contention with other processes not counted.
const DefaultBudget = 75 * time.Second

// childStart is the estimated cost of starting one cell's child process.
const childStart = 30 * time.Millisecond

// Experiment returns `cpusched lab sleep`: work-plus-wait loops with each
// way to wait, over thread counts, one child process per cell.
func Experiment() lab.Experiment {
	return lab.Experiment{
		Name:      "sleep",
		Summary:   "the cost of sleeping: work-plus-wait loops with each way to wait ('High CPU usage of scheduler?', LKML 2012)",
		QuickHelp: fmt.Sprintf("short run: -outer %d (under 20 s)", QuickOuter),
		OutHelp:   "write sleep.json and avg-vs-threads PNG plots into this directory",
		New:       func() lab.Run { return &run{} },
		Child:     child,
	}
}

// run is one `cpusched lab sleep`: its flags, then its Config.
type run struct {
	sleep, budget           *time.Duration
	outer, inner, workKiB   *int
	threads, methods, modes *string
	cfg                     Config
	workPer                 time.Duration // one iteration's work on one CPU
}

func (r *run) Flags(fs *flag.FlagSet) {
	r.sleep = fs.Duration("sleep", DefaultSleep, "wait per iteration")
	r.outer = fs.Int("outer", DefaultOuter, "iterations per worker (trimmed to fit -budget)")
	r.inner = fs.Int("inner", DefaultInner, "work units per iteration")
	r.workKiB = fs.Int("work", DefaultWorkKiB, "KiB summed per work unit")
	r.threads = fs.String("threads", "", "comma-separated worker counts (default powers of 2 up to 4x CPUs)")
	r.methods = fs.String("methods", strings.Join(Methods, ","), "comma-separated wait methods: "+strings.Join(Methods, ", "))
	r.modes = fs.String("modes", strings.Join(Modes, ","), "comma-separated modes: goroutine, locked")
	r.budget = fs.Duration("budget", DefaultBudget, "trim -outer so the estimated sweep fits; 0 disables")
}

func (r *run) Setup(s lab.Setup) error {
	cfg := Config{Sleep: *r.sleep, Outer: *r.outer, Inner: *r.inner, WorkKiB: *r.workKiB,
		Methods: cli.SplitList(*r.methods), Modes: cli.SplitList(*r.modes), Command: s.Child}
	if s.Quick && !s.Given("outer") {
		cfg.Outer = QuickOuter
	}
	if *r.threads == "" {
		cfg.Threads = DefaultThreads(runtime.NumCPU())
	} else {
		for _, t := range cli.SplitList(*r.threads) {
			n, err := strconv.Atoi(t)
			if err != nil {
				return fmt.Errorf("-threads: %q is not a count (want e.g. 1,2,4,8)", t)
			}
			cfg.Threads = append(cfg.Threads, n)
		}
	}
	if *r.budget < 0 {
		return fmt.Errorf("-budget must be >= 0, got %v", *r.budget)
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	r.workPer = MeasureWork(cfg.Inner, cfg.WorkKiB)
	cpus := runtime.NumCPU()
	est := cfg.Estimate(r.workPer, cpus, childStart)
	if *r.budget > 0 && est > *r.budget {
		was := cfg.Outer
		for cfg.Outer > 1 && cfg.Estimate(r.workPer, cpus, childStart) > *r.budget {
			cfg.Outer = cfg.Outer * 3 / 4
		}
		fmt.Fprintf(s.Stderr, "lab sleep: estimated %.0fs at -outer %d; trimmed -outer to %d to stay under -budget %v (-budget 0 keeps it)\n",
			est.Seconds(), was, cfg.Outer, *r.budget)
		est = cfg.Estimate(r.workPer, cpus, childStart)
	}
	fmt.Fprintf(s.Stderr, "lab sleep: %d cells, one work iteration = %v on one CPU, estimated %.0fs\n", len(cfg.Cells()), r.workPer.Round(time.Microsecond), est.Seconds())
	r.cfg = cfg
	return nil
}

func (r *run) Measure(ctx context.Context, progress func(string, ...any)) (*lab.Report, error) {
	start := time.Now()
	r.cfg.Progress = func(i, n int, c CellConfig) {
		progress("lab sleep: cell %d/%d  %s %s %d threads  (%s elapsed)", i+1, n, c.Mode, c.Method, c.Threads, time.Since(start).Round(time.Second))
	}
	results, err := Run(ctx, r.cfg)
	if err != nil {
		return nil, err
	}
	total := time.Since(start)
	cfg := r.cfg
	res := &Result{Sleep: cfg.Sleep.String(), Outer: cfg.Outer, Inner: cfg.Inner, WorkKiB: cfg.WorkKiB,
		CPUs: runtime.NumCPU(), WorkPerIterUs: float64(r.workPer.Nanoseconds()) / 1e3, Cells: results}
	return &lab.Report{
		JSON: res,
		Table: func(w io.Writer) error {
			writeTable(w, results)
			_, err := fmt.Fprintf(w, "\ntotal %.1fs; %d CPUs; work per iteration %.0f us on one CPU (inner %d x %d KiB)\n",
				total.Seconds(), res.CPUs, res.WorkPerIterUs, cfg.Inner, cfg.WorkKiB)
			return err
		},
		Plots: func(dir string) ([]string, error) { return writePlots(dir, cfg, results) },
	}, nil
}

// child is `cpusched lab-child sleep FLAGS`: one cell, one JSON line.
func child(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("lab-child sleep", stderr)
	var c CellConfig
	fs.StringVar(&c.Method, "method", "none", "wait method")
	fs.StringVar(&c.Mode, "mode", "goroutine", "goroutine or locked")
	fs.IntVar(&c.Threads, "threads", 1, "workers")
	fs.DurationVar(&c.Sleep, "sleep", DefaultSleep, "wait per iteration")
	fs.IntVar(&c.Outer, "outer", DefaultOuter, "iterations per worker")
	fs.IntVar(&c.Inner, "inner", DefaultInner, "work units per iteration")
	fs.IntVar(&c.WorkKiB, "work", DefaultWorkKiB, "KiB per work unit")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return cli.Usagef("%v", err)
	}
	r, err := RunCell(ctx, c)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(r)
}
