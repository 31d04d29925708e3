//go:build !linux

package childproc

import (
	"os/exec"
	"testing"
)

func checkDiesWithParent(t *testing.T, cmd *exec.Cmd) {}
