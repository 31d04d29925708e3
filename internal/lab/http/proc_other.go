//go:build !linux

package httplab

import "os/exec"

// setDeathSignal does nothing off Linux: there is no parent-death signal.
func setDeathSignal(cmd *exec.Cmd) {}
