package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cpusched/cpusched/internal/lab/priority"
)

// runLabPriority is `cpusched lab priority`: copies of a CPU loop pinned to
// one CPU under different OS priorities, the same with 1 ms sleeps, and the
// loops as cpusched tasks of different classes on one worker.
func runLabPriority(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab priority", stderr)
	loops := fs.Uint64("loops", 0, "iterations of the CPU loop per copy (0: calibrate to -target)")
	target := fs.Duration("target", priority.DefaultTarget, fmt.Sprintf("time of one loop alone when calibrating (up to %v; -quick: %v)", priority.MaxTarget, priority.QuickTarget))
	sleeps := fs.Int("sleeps", priority.DefaultSleeps, fmt.Sprintf("1 ms sleeps per copy in the sleep variant, 0..%d (0 skips it; -quick: %d)", priority.MaxSleeps, priority.QuickSleeps))
	policies := fs.String("policies", strings.Join(priority.Policies(), ","), "comma-separated OS rows: "+strings.Join(priority.Policies(), ","))
	chunk := fs.Uint64("chunk", priority.DefaultChunk, "cpusched tasks: loop iterations between Checkpoints (>= 1)")
	unpriv := fs.Bool("unprivileged", false, "act as if without CAP_SYS_NICE (shows the skip and nice +19 paths when run as root)")
	quick := fs.Bool("quick", false, "short loops: under 20 s")
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", "also write DIR/priority.json and DIR/priority.png")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("priority: unexpected argument %q", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg := priority.Config{Loops: *loops, Target: *target, Sleeps: *sleeps, Chunk: *chunk, Unprivileged: *unpriv}
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			cfg.Policies = append(cfg.Policies, p)
		}
	}
	if *quick {
		if !set["target"] {
			cfg.Target = priority.QuickTarget
		}
		if !set["sleeps"] {
			cfg.Sleeps = priority.QuickSleeps
		}
	}
	if err := cfg.Validate(); err != nil {
		return usagef("priority: %v", err)
	}
	var err error
	if cfg.Command, err = labChildCommand("priority"); err != nil {
		return err
	}
	return labReport("priority", stdout, stderr, *jsonPath, *outDir,
		func(progress func(string, ...any)) (*priority.Result, bool, error) {
			cfg.Progress = progress
			res, err := priority.Run(ctx, cfg)
			return res, res != nil && len(res.CPULoops) > 0, err
		},
		priority.WriteTable,
		func(dir string, res *priority.Result) ([]string, error) {
			png, err := priority.WritePlot(dir, res)
			return []string{png}, err
		})
}

// childLabPriority is `cpusched lab-child priority ...`: one OS copy
// (-mode cpu or sleep, started by a line on stdin) or the cpusched tasks
// (-mode tasks).
func childLabPriority(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("lab-child priority", stderr)
	mode := fs.String("mode", "cpu", "cpu, sleep or tasks")
	policy := fs.String("policy", priority.Normal, "OS row")
	loops := fs.Uint64("loops", 1000, "loop iterations")
	sleeps := fs.Int("sleeps", 0, "1 ms sleeps")
	chunk := fs.Uint64("chunk", priority.DefaultChunk, "iterations between Checkpoints")
	unpriv := fs.Bool("unprivileged", false, "deny privileged settings")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *mode == "tasks" {
		res, err := priority.RunTasks(ctx, priority.DefaultTasks, *loops, *chunk)
		if err != nil {
			return err
		}
		return json.NewEncoder(stdout).Encode(res)
	}
	return priority.ChildOS(ctx, os.Stdin, stdout, *mode, *policy, *loops, *sleeps, *unpriv)
}
