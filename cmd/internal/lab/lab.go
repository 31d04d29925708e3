// Package lab is the shape every `cpusched lab NAME` experiment has, and the
// one code path that runs it: the flags all experiments share (-quick, -json,
// -out), the experiment's own flags and their checks, the measurement under a
// progress line, and the report as a table, a JSON document and plots.
//
// An experiment measures its workloads in child processes, this program
// re-executed as `cpusched lab-child NAME ARGS` (see ChildCommand): each
// child starts with a fresh runtime and its own counters, dies with the
// parent (childproc.DieWithParent), and reports one JSON line on stdout
// (childproc.Output), except where an experiment needs a conversation with
// its children (priority) or a long-lived server (http, libcalls).
//
// The experiments live in the packages below this one (switchcost,
// priority, sleep, httplab, libcalls), each exporting a function that
// returns its Experiment; cmd/cpusched lists them in a table.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/childproc"
	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// ChildCommand is the hidden command that runs an experiment's child:
// `cpusched lab-child NAME ARGS`. cmd/cpusched routes it to ChildMain.
const ChildCommand = "lab-child"

// Experiment is one row of the lab's table.
type Experiment struct {
	Name    string // `cpusched lab NAME`
	Summary string // one line for `cpusched lab -h`
	// QuickHelp is the usage of -quick (what it shortens, how long the
	// run then takes); OutHelp the usage of -out (the files it writes).
	QuickHelp, OutHelp string
	// New returns a fresh run of the experiment, before its flags exist.
	New func() Run
	// Child is the workload of one child process, `cpusched lab-child
	// NAME ARGS`, which prints its result on stdout.
	Child func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// Run is one run of an experiment, from its flags to its report. Main calls
// its methods once each, in order.
type Run interface {
	// Flags defines the experiment's own flags on fs; Main adds -quick,
	// -json and -out.
	Flags(fs *flag.FlagSet)
	// Setup checks the parsed flags and prepares the measurement. Its error
	// names the first bad flag and the valid values; Main reports it as a
	// usage error. It may write notes on the plan to Setup.Stderr.
	Setup(s Setup) error
	// Measure runs the experiment, reporting where it is through progress
	// (a status line, replaced by the next). It returns the report of what
	// was measured, nil if nothing was, and the error that stopped it
	// early, if any.
	Measure(ctx context.Context, progress func(format string, args ...any)) (*Report, error)
}

// Setup is what Run.Setup gets besides its own flags.
type Setup struct {
	Quick  bool                   // -quick was given
	Given  func(flag string) bool // whether the flag (name without "-") was on the command line
	Child  childproc.Command      // starts `cpusched lab-child NAME args...`
	Stderr io.Writer              // for notes on the plan
}

// Report is what a run measured, in the forms the lab writes.
type Report struct {
	// JSON is the -json document (and NAME.json under -out).
	JSON any
	// Table writes the results for people, with the seed's figures.
	Table func(w io.Writer) error
	// Plots writes the plots into dir, which exists, and returns the paths
	// of the files it wrote. Nil for no plots.
	Plots func(dir string) ([]string, error)
}

// names returns the experiments' names in table order.
func names(table []Experiment) string {
	n := make([]string, len(table))
	for i, e := range table {
		n[i] = e.Name
	}
	return strings.Join(n, ", ")
}

func find(table []Experiment, name string) (Experiment, bool) {
	for _, e := range table {
		if e.Name == name {
			return e, true
		}
	}
	return Experiment{}, false
}

// Main is `cpusched lab NAME [flags]`: it runs the experiment NAME of table
// and writes its report to stdout (the table, or the JSON for -json -), the
// progress and notes to stderr. A bad command line gives a *cli.UsageError.
// If the experiment stops early (a failed child, ctx done) after measuring
// something, Main reports what was measured and returns the error.
func Main(ctx context.Context, table []Experiment, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintf(stderr, "usage: cpusched lab NAME [flags]   (NAME: %s; 'cpusched lab NAME -h' for its flags)\n", names(table))
		for _, e := range table {
			fmt.Fprintf(stderr, "  %-9s %s\n", e.Name, e.Summary)
		}
		if len(args) == 0 {
			return cli.Usagef("missing experiment name (valid: %s)", names(table))
		}
		return nil
	}
	e, ok := find(table, args[0])
	if !ok {
		return cli.Usagef("unknown experiment %q (valid: %s)", args[0], names(table))
	}
	run := e.New()
	fs := cli.NewFlagSet("lab "+e.Name, stderr)
	run.Flags(fs)
	quick := fs.Bool("quick", false, e.QuickHelp)
	jsonPath := fs.String("json", "", "also write the results as JSON to this file (- for stdout, instead of the table)")
	outDir := fs.String("out", "", e.OutHelp)
	if err := cli.Parse(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("%s: unexpected argument %q (lab %s takes only flags)", e.Name, fs.Arg(0), e.Name)
	}
	child, err := childproc.Self(ChildCommand, e.Name)
	if err != nil {
		return fmt.Errorf("lab %s: %w", e.Name, err)
	}
	if err := cli.CheckOutputFile("json", *jsonPath); err != nil {
		return err
	}
	if err := cli.CheckOutputDir("out", *outDir); err != nil {
		return err
	}
	setup := Setup{Quick: *quick, Given: func(name string) bool { return cli.Given(fs, name) }, Child: child, Stderr: stderr}
	if err := run.Setup(setup); err != nil {
		var ue *cli.UsageError
		if !errors.As(err, &ue) {
			err = &cli.UsageError{Msg: err.Error()}
		}
		return err
	}
	prog := report.NewProgress(stderr)
	rep, runErr := run.Measure(ctx, prog.Set)
	prog.Done()
	if rep == nil {
		return runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "lab %s: stopped early (%v): the tables show what was measured until then\n", e.Name, runErr)
	}
	if err := write(e.Name, rep, *jsonPath, *outDir, stdout); err != nil {
		return err
	}
	return runErr
}

// write prints the table (or the JSON for -json -), writes the JSON to
// jsonPath and, with -out, the JSON and the plots into outDir.
func write(name string, rep *Report, jsonPath, outDir string, stdout io.Writer) error {
	if jsonPath == "-" {
		if err := writeJSON(stdout, rep.JSON); err != nil {
			return err
		}
	} else if err := rep.Table(stdout); err != nil {
		return err
	}
	if jsonPath != "" && jsonPath != "-" {
		if err := writeJSONFile(jsonPath, rep.JSON); err != nil {
			return err
		}
	}
	if outDir == "" {
		return nil
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	written := filepath.Join(outDir, name+".json")
	if err := writeJSONFile(written, rep.JSON); err != nil {
		return err
	}
	if rep.Plots != nil {
		paths, err := rep.Plots(outDir)
		if err != nil {
			return fmt.Errorf("lab %s: plot: %w", name, err)
		}
		if len(paths) > 0 {
			written += " and " + strings.Join(paths, ", ")
		}
	}
	if jsonPath != "-" {
		fmt.Fprintf(stdout, "wrote %s\n", written)
	}
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeJSONFile(path string, v any) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeJSON(f, v); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ChildMain is `cpusched lab-child NAME ARGS`: the child workload of the
// experiment NAME of table.
func ChildMain(ctx context.Context, table []Experiment, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return cli.Usagef("%s: missing experiment name", ChildCommand)
	}
	e, ok := find(table, args[0])
	if !ok || e.Child == nil {
		return cli.Usagef("%s: no child workload for %q", ChildCommand, args[0])
	}
	return e.Child(ctx, args[1:], stdout, stderr)
}
