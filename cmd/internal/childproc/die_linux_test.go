package childproc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func checkDiesWithParent(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if cmd.SysProcAttr == nil || cmd.SysProcAttr.Pdeathsig != syscall.SIGKILL {
		t.Errorf("%s: got SysProcAttr %+v, want Pdeathsig SIGKILL", cmd.Args, cmd.SysProcAttr)
	}
}

// TestDieWithParent kills a parent process and checks that its child, which
// would otherwise sleep for a minute, is killed with it.
func TestDieWithParent(t *testing.T) {
	parent := helper(context.Background(), "parent")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	pid, convErr := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || convErr != nil {
		parent.Process.Kill()
		parent.Wait()
		t.Fatalf("reading the child's pid: got %q, %v", line, err)
	}
	if !alive(pid) {
		t.Fatalf("child %d: not running before its parent was killed", pid)
	}
	parent.Process.Kill()
	parent.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("child %d: still running 10 s after its parent was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether process pid exists and is not a zombie (a killed
// orphan stays a zombie until init reaps it).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func TestDieWithParentKeepsSysProcAttr(t *testing.T) {
	cmd := exec.Command("true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	DieWithParent(cmd)
	if !cmd.SysProcAttr.Setpgid {
		t.Errorf("DieWithParent dropped Setpgid: got %+v", cmd.SysProcAttr)
	}
	checkDiesWithParent(t, cmd)
}
