// Package childproc starts the child processes of cpusched's commands and
// reads their results: a child dies with its parent (on Linux), and a
// finished child reports one JSON document as the last line of its stdout.
//
// The lab experiments and the benchmark run their workloads in children so
// that each measurement starts with a fresh runtime, its own GOMAXPROCS,
// thread priorities and per-process counters. A child that outlived an
// interrupted parent would keep loading the machine, and the next
// measurement with it; hence DieWithParent on every child started here.
package childproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Command builds the child process that runs with args; the lab experiments
// take one so that tests can substitute a helper process.
type Command func(ctx context.Context, args ...string) *exec.Cmd

// waitDelay is how long a child whose context is done gets, after the kill,
// until its pipes are closed and Wait returns.
const waitDelay = 2 * time.Second

// Self returns the Command that re-executes this program as
// `PROGRAM prefix... args...` (for example prefix "lab-child", "switch"),
// with DieWithParent set. It fails only if the program's path is unknown.
func Self(prefix ...string) (Command, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to re-execute: %w", err)
	}
	prefix = append([]string(nil), prefix...)
	return func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, exe, append(append([]string(nil), prefix...), args...)...)
		cmd.WaitDelay = waitDelay
		DieWithParent(cmd)
		return cmd
	}, nil
}

// Output runs cmd to completion and decodes its result, the last non-empty
// line of its stdout, as JSON into v. cmd's Stdout and Stderr must be unset.
// If ctx (the context cmd was made with) is done, the error is ctx.Err();
// any other failure's error carries the child's stderr.
func Output(ctx context.Context, cmd *exec.Cmd, v any) error {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return DecodeLast(out, v)
}

// DecodeLast decodes the last non-empty line of out as JSON into v; the
// lines before it (a child's chatter) are ignored.
func DecodeLast(out []byte, v any) error {
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return errors.New("the child printed no result")
	}
	last := out[bytes.LastIndexByte(out, '\n')+1:]
	if err := json.Unmarshal(bytes.TrimSpace(last), v); err != nil {
		return fmt.Errorf("the child's result %q: %w", last, err)
	}
	return nil
}

// ReadLine reads one line from r and decodes it as JSON into v: one message
// of a child that reports as it goes. A last line without a newline counts.
func ReadLine(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil && len(bytes.TrimSpace(line)) == 0 {
		return err
	}
	return json.Unmarshal(bytes.TrimSpace(line), v)
}
