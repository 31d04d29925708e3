package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/cli"
	"github.com/cpusched/cpusched/cmd/internal/report"
	"github.com/cpusched/cpusched/cmd/internal/soak"
)

// runSoak is `cpusched soak`: it starts `cpusched serve` as a child process
// on 127.0.0.1, drives every endpoint with a hostile mix (bad parameters,
// cancelled requests, a distinct group per request) for -d, samples the
// server's RSS, goroutines, threads and fds every second, and prints a
// table, the outcome counts and the verdict of soak.Rule. It returns an
// error (exit status 1) when the server fails the rule, answers a request
// unexpectedly, dies or does not shut down cleanly; on SIGINT it stops the
// server, prints what it measured and returns the interruption.
func runSoak(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("soak", stderr)
	duration := fs.Duration("d", soak.DefaultDuration, "length of the run ("+soak.DurationRange()+")")
	fs.DurationVar(duration, "duration", soak.DefaultDuration, "the same as -d")
	jsonPath := fs.String("json", "", "also write the samples, counts and checks as JSON to this file (- for stdout, instead of the table)")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cpusched soak [-d DURATION] [-json FILE]")
		fmt.Fprintln(fs.Output(), "Pass rule: "+soak.RuleText+".")
		fs.PrintDefaults()
	}
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q (soak takes only flags)", fs.Arg(0))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program to start the server: %w", err)
	}
	cfg := soak.DefaultConfig(exe, "serve")
	cfg.Duration = *duration
	if err := cfg.Validate(); err != nil {
		return cli.Usagef("%s", strings.TrimPrefix(err.Error(), "soak: "))
	}
	if err := cli.CheckOutputFile("json", *jsonPath); err != nil {
		return err
	}
	cfg.Progress = report.NewProgress(stderr)

	rep, runErr := soak.Run(ctx, cfg)
	if runErr != nil {
		// main already says "cpusched soak:".
		runErr = errors.New(strings.TrimPrefix(runErr.Error(), "soak: "))
		if ctx.Err() != nil {
			runErr = errors.New("interrupted")
		}
	}
	if rep == nil {
		return runErr
	}
	if runErr != nil {
		fmt.Fprintf(stderr, "stopped early (%v): the results cover the run until then\n", runErr)
	}
	if err := writeSoakOutputs(rep, *jsonPath, stdout); err != nil {
		return err
	}
	if runErr != nil {
		return runErr
	}
	if !rep.Pass {
		return fmt.Errorf("FAIL: %s", strings.Join(rep.Failed(), ", "))
	}
	return nil
}

// writeSoakOutputs prints the table (unless the JSON goes to stdout) and
// writes the JSON file.
func writeSoakOutputs(rep *soak.Report, jsonPath string, stdout io.Writer) error {
	if jsonPath == "-" {
		return rep.WriteJSON(stdout)
	}
	if err := rep.WriteTable(stdout); err != nil {
		return err
	}
	if jsonPath != "" {
		return writeFile(jsonPath, rep.WriteJSON)
	}
	return nil
}
