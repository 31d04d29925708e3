// How the servers start: as a container runs a service when the lab runs
// as root (package unpriv), as `cpusched bench` starts its servers, unless
// Config.Privileged.

package libcalls

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/cpusched/cpusched/cmd/internal/unpriv"
)

// geteuid is os.Geteuid; tests replace it to take the root and non-root
// paths on any machine.
var geteuid = os.Geteuid

// launcher turns the commands of Config.Command into the ones that run the
// servers as the run says. It is not for concurrent use.
type launcher struct {
	// asService: through unpriv.Wrap, from a copy of the program that uid
	// 65534 can run, made at the first wrap and removed by close.
	asService bool
	// Server says how the servers run, for the report.
	server string

	copied string       // the copy's path, once made
	remove func() error // removes it; a no-op until then
}

// newLauncher returns the launcher of a run; privileged keeps root's
// privileges, which only root has to keep.
func newLauncher(privileged bool) (*launcher, error) {
	euid := geteuid()
	l := &launcher{remove: func() error { return nil }}
	switch {
	case privileged && euid != 0:
		return nil, fmt.Errorf("-privileged keeps root's privileges, but this is uid %d: run as root, or leave -privileged out", euid)
	case privileged:
		l.server = "privileged (root)"
	case euid == 0 && runtime.GOOS != "linux":
		l.server = "privileged (root; running them as a service is Linux-only)"
	case euid == 0:
		l.asService = true
		l.server = "unprivileged (" + unpriv.ServiceState().String() + "), as a container runs a service"
	default:
		self := fmt.Sprintf("uid %d", euid)
		if st, err := unpriv.Read(0); err == nil {
			self = st.String()
		}
		l.server = "unprivileged (" + self + "), as the lab runs"
	}
	return l, nil
}

// wrap makes cmd, not yet started, run as l says: as it is, or the same
// program and arguments through `unprivileged --` from the copy.
func (l *launcher) wrap(cmd *exec.Cmd) error {
	if !l.asService {
		return nil
	}
	if l.copied == "" {
		copied, remove, err := unpriv.CopyExecutable(cmd.Path)
		if err != nil {
			return err
		}
		l.copied, l.remove = copied, remove
	}
	cmd.Path = l.copied
	cmd.Args = append([]string{l.copied}, unpriv.Wrap(l.copied, cmd.Args[1:])...)
	return nil
}

// check returns an error naming what differs if process pid (what it is,
// for the message) does not run as l says.
func (l *launcher) check(pid int, what string) error {
	if !l.asService {
		return nil
	}
	if err := unpriv.CheckService(pid); err != nil {
		return fmt.Errorf("%s (pid %d): %w", what, pid, err)
	}
	return nil
}

// close removes the copy of the program, once the servers have exited.
func (l *launcher) close() error { return l.remove() }
