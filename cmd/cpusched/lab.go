package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cpusched/cpusched/internal/report"
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
	"sleep":    {summary: "the cost of sleeping: work-plus-wait loops with each way to wait ('High CPU usage of scheduler?', LKML 2012)", run: runLabSleep, child: childLabSleep},
	"http":     {summary: "HTTP servers answering 1 MiB, one process each, under ab-style load ('Benchmarking Go, Scala and Node.js', 2014)", run: runLabHTTP, child: childLabHTTP},
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

// labReport is the end that lab switch and lab priority share: it runs the
// experiment under a progress line and, if anything was measured, says
// whether the run stopped early and writes the table (or -json), the JSON
// files and the plots. It returns run's error.
func labReport[R any](name string, stdout, stderr io.Writer, jsonPath, outDir string,
	run func(progress func(string, ...any)) (res R, measured bool, err error),
	table func(io.Writer, R) error, plots func(dir string, res R) ([]string, error)) error {
	prog := report.NewProgress(stderr)
	res, measured, runErr := run(prog.Set)
	prog.Done()
	if !measured {
		return runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "lab %s: stopped early (%v): the tables show what was measured until then\n", name, runErr)
	}
	jsonName := name + ".json"
	if err := labWriteOutputs(res, jsonPath, outDir, jsonName, stdout, func(w io.Writer) error { return table(w, res) }); err != nil {
		return err
	}
	if outDir != "" {
		paths, err := plots(outDir, res)
		if err != nil {
			return fmt.Errorf("lab %s: plot: %w", name, err)
		}
		if jsonPath != "-" {
			fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(outDir, jsonName), strings.Join(paths, ", "))
		}
	}
	return runErr
}

// labWriteOutputs prints the table (or the JSON for -json -) and writes the
// JSON to jsonPath and to outDir/jsonName when asked.
func labWriteOutputs(v any, jsonPath, outDir, jsonName string, stdout io.Writer, table func(io.Writer) error) error {
	writeJSON := func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	writeTo := func(path string) error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		if err := writeJSON(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}
	if jsonPath == "-" {
		if err := writeJSON(stdout); err != nil {
			return err
		}
	} else if err := table(stdout); err != nil {
		return err
	}
	if jsonPath != "" && jsonPath != "-" {
		if err := writeTo(jsonPath); err != nil {
			return err
		}
	}
	if outDir != "" {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return err
		}
		if err := writeTo(filepath.Join(outDir, jsonName)); err != nil {
			return err
		}
	}
	return nil
}
