package main

import (
	"context"
	"io"
	"os/exec"

	"github.com/cpusched/cpusched/cmd/internal/lab"
	"github.com/cpusched/cpusched/cmd/internal/lab/httplab"
	"github.com/cpusched/cpusched/cmd/internal/lab/libcalls"
	"github.com/cpusched/cpusched/cmd/internal/lab/priority"
	"github.com/cpusched/cpusched/cmd/internal/lab/sleep"
	"github.com/cpusched/cpusched/cmd/internal/lab/switchcost"
)

// labHTTPLookPath finds node, javac and java for lab http; tests replace it
// to take the skip path.
var labHTTPLookPath = exec.LookPath

// labExperiments is the lab's table, in the order `cpusched lab -h` lists
// it. A function, so that nothing is built at import and a test's
// labHTTPLookPath is the one used.
func labExperiments() []lab.Experiment {
	return []lab.Experiment{
		httplab.Experiment(labHTTPLookPath),
		libcalls.Experiment(),
		priority.Experiment(),
		sleep.Experiment(),
		switchcost.Experiment(),
	}
}

// runLab is `cpusched lab NAME [flags]`.
func runLab(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return lab.Main(ctx, labExperiments(), args, stdout, stderr)
}

// runLabChild is the hidden command the lab re-executes itself as:
// `cpusched lab-child NAME ARGS`.
func runLabChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return lab.ChildMain(ctx, labExperiments(), args, stdout, stderr)
}
