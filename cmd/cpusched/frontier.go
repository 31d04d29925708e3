package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/bench"
	"github.com/cpusched/cpusched/cmd/internal/cli"
)

// runFrontier is `cpusched frontier`: one plot of several settings'
// trade-offs, each from the JSON of bench runs (each run beside its own
// floor), for the settings that the bench's modes do not cover: two
// commits, a -slice, a throwaway build.
func runFrontier(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("frontier", stderr)
	steps := bench.FrontierSteps()
	step := fs.String("step", bench.StepHogSched, "the step to plot: "+strings.Join(steps, ", "))
	out := fs.String("o", "frontier.png", "the plot to write (.png or .svg)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched frontier [-step STEP] [-o FILE] SETTING=RUN.json[,RUN.json...] ...")
		fmt.Fprintln(fs.Output(), "  each RUN.json is a bench report (bench -json FILE, or DIR/bench.json of bench -out DIR)")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return cli.Usagef("no argument: want SETTING=RUN.json[,RUN.json...], one per setting")
	}
	if !slices.Contains(steps, *step) {
		return cli.Usagef("-step %q: want one of %s", *step, strings.Join(steps, ", "))
	}
	var settings []bench.FrontierSetting
	for _, arg := range fs.Args() {
		name, files, ok := strings.Cut(arg, "=")
		if !ok || name == "" || files == "" {
			return cli.Usagef("argument %q: want SETTING=RUN.json[,RUN.json...]", arg)
		}
		set := bench.FrontierSetting{Name: name}
		for _, f := range cli.SplitList(files) {
			r, err := bench.ReadReport(f)
			if err != nil {
				return fmt.Errorf("setting %q: %w", name, err)
			}
			set.Runs = append(set.Runs, r)
		}
		settings = append(settings, set)
	}
	if err := bench.WriteFrontierOf(*out, *step, settings); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return nil
}
