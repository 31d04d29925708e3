package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// experiment is one row of the lab's table: `cpusched lab NAME [flags]`.
// run does the whole experiment in the parent process; child is what a
// re-executed `cpusched lab-child NAME args...` does for it (each measured
// workload runs in its own process, so GOMAXPROCS, thread priorities and
// per-process counters are clean). child may be nil.
type experiment struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	child   func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// experiments is the lab's table: one entry per lab_NAME.go file, which
// defines the entry's functions. A plain literal: nothing registers itself
// at import.
var experiments = map[string]experiment{
	"switch":   {summary: "goroutine switching cost: busy, Gosched, channel and cpusched loops over GOMAXPROCS", run: runLabSwitch, child: childLabSwitch},
	"priority": {summary: "nice, SCHED_BATCH/IDLE/RR and cpusched classes on contending CPU loops", run: runLabPriority, child: childLabPriority},
	"sleep":    {summary: "the cost of sleeping: work-plus-wait loops with each way to wait (seeds.md s.4)", run: runLabSleep, child: childLabSleep},
	"http":     {summary: "HTTP servers answering 1 MiB, one process each, under ab-style load (seeds.md s.5)", run: runLabHTTP, child: childLabHTTP},
}

func labNames() string {
	names := make([]string, 0, len(experiments))
	for n := range experiments {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// runLab dispatches `cpusched lab NAME [flags]`.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stderr, "usage: cpusched lab NAME [flags]   (NAME: "+labNames()+"; 'cpusched lab NAME -h' for its flags)")
		for _, n := range strings.Split(labNames(), ", ") {
			if e, ok := experiments[n]; ok {
				fmt.Fprintf(stderr, "  %-9s %s\n", n, e.summary)
			}
		}
		if len(args) == 0 {
			return usagef("missing experiment name (valid: %s)", labNames())
		}
		return nil
	}
	e, ok := experiments[args[0]]
	if !ok {
		return usagef("unknown experiment %q (valid: %s)", args[0], labNames())
	}
	return e.run(ctx, args[1:], stdout, stderr)
}

// labChildCommand returns a function that builds `cpusched lab-child NAME
// args...` for experiment name, re-executing this program.
func labChildCommand(name string) (func(ctx context.Context, args ...string) *exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("lab %s: finding this program to re-execute: %w", name, err)
	}
	return func(ctx context.Context, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, exe, append([]string{"lab-child", name}, args...)...)
	}, nil
}

// runLabChild is the hidden command the lab re-executes itself as.
func runLabChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("lab-child: missing experiment name")
	}
	e, ok := experiments[args[0]]
	if !ok || e.child == nil {
		return usagef("lab-child: no child workload for %q", args[0])
	}
	return e.child(ctx, args[1:], stdout, stderr)
}
