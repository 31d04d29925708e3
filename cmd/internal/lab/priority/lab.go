package priority

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/lab"
)

// Experiment returns `cpusched lab priority`: copies of a CPU loop pinned to
// one CPU under different OS priorities, the same with 1 ms sleeps, and the
// loops as cpusched tasks of different classes on one worker.
func Experiment() lab.Experiment {
	return lab.Experiment{
		Name:      "priority",
		Summary:   "nice, SCHED_BATCH/IDLE/RR and cpusched classes on contending CPU loops",
		QuickHelp: "short loops: under 20 s",
		OutHelp:   "also write DIR/priority.json and DIR/priority.png",
		New:       func() lab.Run { return &run{} },
		Child:     child,
	}
}

// run is one `cpusched lab priority`: its flags, then its Config.
type run struct {
	loops, chunk *uint64
	target       *time.Duration
	sleeps       *int
	policies     *string
	unprivileged *bool
	cfg          Config
}

func (r *run) Flags(fs *flag.FlagSet) {
	r.loops = fs.Uint64("loops", 0, "iterations of the CPU loop per copy (0: calibrate to -target)")
	r.target = fs.Duration("target", DefaultTarget, fmt.Sprintf("time of one loop alone when calibrating (up to %v; -quick: %v)", MaxTarget, QuickTarget))
	r.sleeps = fs.Int("sleeps", DefaultSleeps, fmt.Sprintf("1 ms sleeps per copy in the sleep variant, 0..%d (0 skips it; -quick: %d)", MaxSleeps, QuickSleeps))
	r.policies = fs.String("policies", strings.Join(Policies(), ","), "comma-separated OS rows: "+strings.Join(Policies(), ","))
	r.chunk = fs.Uint64("chunk", DefaultChunk, "cpusched tasks: loop iterations between Checkpoints (>= 1)")
	r.unprivileged = fs.Bool("unprivileged", false, "act as if without CAP_SYS_NICE (shows the skip and nice +19 paths when run as root)")
}

func (r *run) Setup(s lab.Setup) error {
	cfg := Config{Loops: *r.loops, Target: *r.target, Sleeps: *r.sleeps, Policies: cli.SplitList(*r.policies),
		Chunk: *r.chunk, Unprivileged: *r.unprivileged, Command: s.Child}
	if s.Quick {
		if !s.Given("target") {
			cfg.Target = QuickTarget
		}
		if !s.Given("sleeps") {
			cfg.Sleeps = QuickSleeps
		}
	}
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("priority: %v", err)
	}
	r.cfg = cfg
	return nil
}

func (r *run) Measure(ctx context.Context, progress func(string, ...any)) (*lab.Report, error) {
	r.cfg.Progress = progress
	res, err := Run(ctx, r.cfg)
	if res == nil || len(res.CPULoops) == 0 {
		return nil, err
	}
	return &lab.Report{
		JSON:  res,
		Table: func(w io.Writer) error { return WriteTable(w, res) },
		Plots: func(dir string) ([]string, error) {
			png, err := WritePlot(dir, res)
			return []string{png}, err
		},
	}, err
}

// child is `cpusched lab-child priority ...`: one OS copy (-mode cpu or
// sleep, started by a line on stdin) or the cpusched tasks (-mode tasks).
func child(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("lab-child priority", stderr)
	mode := fs.String("mode", "cpu", "cpu, sleep or tasks")
	policy := fs.String("policy", Normal, "OS row")
	loops := fs.Uint64("loops", 1000, "loop iterations")
	sleeps := fs.Int("sleeps", 0, "1 ms sleeps")
	chunk := fs.Uint64("chunk", DefaultChunk, "iterations between Checkpoints")
	unprivileged := fs.Bool("unprivileged", false, "deny privileged settings")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *mode == "tasks" {
		res, err := RunTasks(ctx, DefaultTasks, *loops, *chunk)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(res)
	}
	return ChildOS(ctx, os.Stdin, stdout, *mode, *policy, *loops, *sleeps, *unprivileged)
}
