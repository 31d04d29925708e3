package httplab

import (
	"os/exec"
	"syscall"
)

// setDeathSignal makes the server die with the parent, so an interrupted run
// leaves no orphan server.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
