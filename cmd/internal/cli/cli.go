// Package cli is the command-line plumbing that cmd/cpusched and the lab
// experiments share: flag sets that return errors instead of exiting, the
// usage error that main turns into exit status 2, which flags were given,
// comma-separated list values, and output paths checked before a long run.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// UsageError is an error in the command line itself (a bad flag, a bad
// argument). cmd/cpusched prints it and exits with status 2; any other error
// exits with status 1.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...)}
}

// NewFlagSet returns the flag set of `cpusched name`, which reports errors
// and -h output on stderr instead of exiting.
func NewFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("cpusched "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// Parse parses args into fs and turns a parse failure into a *UsageError.
// It returns flag.ErrHelp unchanged for -h, which is not a failure.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &UsageError{Msg: err.Error()}
	}
	return nil
}

// Given reports whether the flag name was on the command line that fs
// parsed, as opposed to holding its default.
func Given(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// SplitList splits a comma-separated flag value ("a, b,,c") into its
// items, trimmed, dropping empty ones; it returns nil for no items.
func SplitList(s string) []string {
	var items []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

// CheckChoices checks the items of a list flag (SplitList's) against the
// valid ones: it returns an error naming the flag and the valid items if
// items is empty, holds one that is not valid ("-kinds: unknown kind
// \"zstd\" (valid: gzip, bcrypt)", noun naming an item) or holds one
// twice; nil if not.
func CheckChoices(flag, noun string, items, valid []string) error {
	choices := strings.Join(valid, ", ")
	if len(items) == 0 {
		return fmt.Errorf("-%s must not be empty (valid: %s)", flag, choices)
	}
	for i, item := range items {
		if !slices.Contains(valid, item) {
			return fmt.Errorf("-%s: unknown %s %q (valid: %s)", flag, noun, item, choices)
		}
		if slices.Contains(items[:i], item) {
			return fmt.Errorf("-%s: %q is listed twice", flag, item)
		}
	}
	return nil
}

// CheckOutputFile checks, before a run that may take minutes, that the file
// a flag names (-json FILE) can be written at its end, so that a typo in
// the path does not lose the run's results: "" and "-" (stdout) need no
// check. It leaves an existing file as it is and removes one it had to
// create. The error is a *UsageError naming the flag and the path.
func CheckOutputFile(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return Usagef("-%s %s: is a directory; want a file to write the results to", flag, path)
	}
	_, statErr := os.Lstat(path)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return Usagef("-%s %s: cannot be written, so the results would be lost at the end of the run: %v", flag, path, unwrapPath(err))
	}
	f.Close()
	if os.IsNotExist(statErr) {
		os.Remove(path)
	}
	return nil
}

// CheckOutputDir is CheckOutputFile for a directory a flag names (-out
// DIR): it makes the directory, as the run would at its end, and checks
// that a file can be made in it.
func CheckOutputDir(flag, dir string) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Usagef("-%s %s: cannot be made, so the results would be lost at the end of the run: %v", flag, dir, unwrapPath(err))
	}
	f, err := os.CreateTemp(dir, ".cpusched-check-*")
	if err != nil {
		return Usagef("-%s %s: cannot be written, so the results would be lost at the end of the run: %v", flag, dir, unwrapPath(err))
	}
	f.Close()
	os.Remove(f.Name())
	return nil
}

// unwrapPath drops the operation and path that an *os.PathError repeats
// ("open x.json: no such file or directory"), since the message names the
// path already.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
