//go:build !linux

package unpriv

import (
	"errors"
	"io"
)

// Main fails: RLIMIT_NICE and the capabilities are Linux's.
func Main(args []string, stderr io.Writer) error {
	if _, err := parseArgs(args, stderr); err != nil {
		return err
	}
	return errors.New("running a command as a Linux service runs (RLIMIT_NICE, capabilities) is Linux-only")
}
