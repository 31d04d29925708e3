//go:build !linux

package childproc

import "os/exec"

// DieWithParent does nothing where there is no parent-death signal: the
// callers still stop their children on every return path.
func DieWithParent(cmd *exec.Cmd) {}
