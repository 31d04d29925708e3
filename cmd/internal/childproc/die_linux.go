package childproc

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes the kernel send cmd's process SIGKILL when its parent
// dies, so that an interrupted or crashed parent leaves no child running.
// Call it before cmd.Start; it keeps the other fields of cmd.SysProcAttr.
//
// The kernel sends the signal when the thread that started the child exits,
// not the process. Go ends a thread only when a goroutine locked to it
// (runtime.LockOSThread) returns without unlocking, so start children from
// unlocked goroutines.
func DieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
