package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"

	switchcost "github.com/cpusched/cpusched/internal/lab/switch"
)

// runLabSwitch is `cpusched lab switch`: the seed's goroutine switching
// workloads (and the same loop as cpusched tasks) over a sweep of
// GOMAXPROCS and buffers, one child process per cell.
func runLabSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab switch", stderr)
	workloads := fs.String("workloads", strings.Join(switchcost.Workloads(), ","), "comma-separated workloads: "+strings.Join(switchcost.Workloads(), ","))
	procs := fs.String("procs", "", "comma-separated GOMAXPROCS values (default 1 up to 2x the CPUs)")
	clients := fs.Int("clients", switchcost.DefaultClients, fmt.Sprintf("goroutines (chan: pairs; cpusched: tasks) per cell, 1..%d", switchcost.MaxClients))
	buffers := fs.String("buffer", "0,1000", "comma-separated buffers: Gosched/Checkpoint every N iterations (0: every one), channel capacity")
	duration := fs.Duration("duration", switchcost.DefaultDuration, fmt.Sprintf("measured time per cell (%v..%v); shortened so the sweep fits %v (-quick: %v)", switchcost.MinDuration, switchcost.MaxDuration, switchcost.Budget, switchcost.QuickBudget))
	quick := fs.Bool("quick", false, "fewer, shorter cells: under 20 s")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", "also write DIR/switch.json and the plots DIR/switch-ops.png, switch-sys.png, switch-ops-per-cpu.png")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("switch: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	cfg := switchcost.Config{Clients: *clients, Duration: *duration}
	for _, w := range strings.Split(*workloads, ",") {
		if w = strings.TrimSpace(w); w != "" {
			cfg.Workloads = append(cfg.Workloads, w)
		}
	}
	var err error
	if !set["procs"] {
		cfg.Procs = switchcost.DefaultProcs(runtime.NumCPU(), *quick)
	} else if cfg.Procs, err = switchcost.ParseInts("-procs", *procs); err != nil {
		return usagef("switch: %v (valid: integers 1..%d)", err, switchcost.MaxProcs)
	}
	if cfg.Buffers, err = switchcost.ParseInts("-buffer", *buffers); err != nil {
		return usagef("switch: %v (valid: integers >= 0)", err)
	}
	if err := cfg.Validate(); err != nil {
		return usagef("switch: %v", err)
	}
	budget := switchcost.Budget
	if *quick {
		budget = switchcost.QuickBudget
		if !set["duration"] {
			cfg.Duration = switchcost.QuickDuration
		}
	}
	if fitted := switchcost.FitDuration(cfg.Duration, len(cfg.Cells()), budget); fitted != cfg.Duration {
		fmt.Fprintf(stderr, "lab switch: %d cells: %v per cell (instead of %v) to finish within %v\n", len(cfg.Cells()), fitted, cfg.Duration, budget)
		cfg.Duration = fitted
	}
	if cfg.Command, err = labChildCommand("switch"); err != nil {
		return err
	}
	return labReport("switch", stdout, stderr, *jsonPath, *outDir,
		func(progress func(string, ...any)) (*switchcost.Result, bool, error) {
			cfg.Progress = progress
			res, err := switchcost.Run(ctx, cfg)
			return res, res != nil && len(res.Cells) > 0, err
		},
		switchcost.WriteTable, switchcost.WritePlots)
}

// childLabSwitch is `cpusched lab-child switch ...`: one cell, printed as
// one JSON line.
func childLabSwitch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab-child switch", stderr)
	var s switchcost.Spec
	fs.StringVar(&s.Workload, "workload", switchcost.Busy, "workload")
	fs.IntVar(&s.Procs, "procs", 1, "GOMAXPROCS")
	fs.IntVar(&s.Clients, "clients", switchcost.DefaultClients, "clients")
	fs.IntVar(&s.Buffer, "buffer", 0, "buffer (-1: ignored)")
	d := fs.Duration("duration", switchcost.DefaultDuration, "measured time")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if s.Procs < 1 || s.Procs > switchcost.MaxProcs || s.Clients < 1 || s.Buffer < -1 || *d <= 0 {
		return usagef("lab-child switch: bad cell %+v duration %v", s, *d)
	}
	c, err := switchcost.Measure(ctx, s, *d)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(c)
}
