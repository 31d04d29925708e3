package switchcost

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/lab"
)

// Experiment returns `cpusched lab switch`: the seed's goroutine switching
// workloads (and the same loop as cpusched tasks) over a sweep of GOMAXPROCS
// and buffers, one child process per cell.
func Experiment() lab.Experiment {
	return lab.Experiment{
		Name:      "switch",
		Summary:   "goroutine switching cost: busy, Gosched, channel and cpusched loops over GOMAXPROCS",
		QuickHelp: "fewer, shorter cells: under 20 s",
		OutHelp:   "also write DIR/switch.json and the plots DIR/switch-ops.png, switch-sys.png, switch-ops-per-cpu.png",
		New:       func() lab.Run { return &run{} },
		Child:     child,
	}
}

// run is one `cpusched lab switch`: its flags, then its Config.
type run struct {
	workloads, procs, buffers *string
	clients                   *int
	duration                  *time.Duration
	cfg                       Config
}

func (r *run) Flags(fs *flag.FlagSet) {
	r.workloads = fs.String("workloads", strings.Join(Workloads(), ","), "comma-separated workloads: "+strings.Join(Workloads(), ","))
	r.procs = fs.String("procs", "", "comma-separated GOMAXPROCS values (default 1 up to 2x the CPUs)")
	r.clients = fs.Int("clients", DefaultClients, fmt.Sprintf("goroutines (chan: pairs; cpusched: tasks) per cell, 1..%d", MaxClients))
	r.buffers = fs.String("buffer", "0,1000", "comma-separated buffers: Gosched/Checkpoint every N iterations (0: every one), channel capacity")
	r.duration = fs.Duration("duration", DefaultDuration, fmt.Sprintf("measured time per cell (%v..%v); shortened so the sweep fits %v (-quick: %v)", MinDuration, MaxDuration, Budget, QuickBudget))
}

func (r *run) Setup(s lab.Setup) error {
	cfg := Config{Workloads: cli.SplitList(*r.workloads), Clients: *r.clients, Duration: *r.duration, Command: s.Child}
	var err error
	if !s.Given("procs") {
		cfg.Procs = DefaultProcs(runtime.NumCPU(), s.Quick)
	} else if cfg.Procs, err = ParseInts("-procs", *r.procs); err != nil {
		return fmt.Errorf("switch: %v (valid: integers 1..%d)", err, MaxProcs)
	}
	if cfg.Buffers, err = ParseInts("-buffer", *r.buffers); err != nil {
		return fmt.Errorf("switch: %v (valid: integers >= 0)", err)
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("switch: %v", err)
	}
	budget := Budget
	if s.Quick {
		budget = QuickBudget
		if !s.Given("duration") {
			cfg.Duration = QuickDuration
		}
	}
	if fitted := FitDuration(cfg.Duration, len(cfg.Cells()), budget); fitted != cfg.Duration {
		fmt.Fprintf(s.Stderr, "lab switch: %d cells: %v per cell (instead of %v) to finish within %v\n", len(cfg.Cells()), fitted, cfg.Duration, budget)
		cfg.Duration = fitted
	}
	r.cfg = cfg
	return nil
}

func (r *run) Measure(ctx context.Context, progress func(string, ...any)) (*lab.Report, error) {
	r.cfg.Progress = progress
	res, err := Run(ctx, r.cfg)
	if res == nil || len(res.Cells) == 0 {
		return nil, err
	}
	return &lab.Report{
		JSON:  res,
		Table: func(w io.Writer) error { return WriteTable(w, res) },
		Plots: func(dir string) ([]string, error) { return WritePlots(dir, res) },
	}, err
}

// child is `cpusched lab-child switch ...`: one cell, printed as one JSON
// line.
func child(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("lab-child switch", stderr)
	var s Spec
	fs.StringVar(&s.Workload, "workload", Busy, "workload")
	fs.IntVar(&s.Procs, "procs", 1, "GOMAXPROCS")
	fs.IntVar(&s.Clients, "clients", DefaultClients, "clients")
	fs.IntVar(&s.Buffer, "buffer", 0, "buffer (-1: ignored)")
	d := fs.Duration("duration", DefaultDuration, "measured time")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if s.Procs < 1 || s.Procs > MaxProcs || s.Clients < 1 || s.Buffer < -1 || *d <= 0 {
		return cli.Usagef("lab-child switch: bad cell %+v duration %v", s, *d)
	}
	c, err := Measure(ctx, s, *d)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(c)
}
