// How a run starts its child processes: as a container runs a service
// (package unpriv) when the bench runs as root, unless Config.Privileged.
//
// A container's process has no CAP_SYS_NICE and RLIMIT_NICE 0, so a
// thread cpusched lowers to SCHED_IDLE can never be raised back, and the
// library takes another path there (cpusched.Stats.ThreadsRaisable). The
// servers therefore run that way by default, and so do the floor's hog
// and the neighbour, so that the floor is measured as the same kind of
// process as the servers it is the reference of, and the neighbour as
// another service beside them.

package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/cpusched/cpusched/cmd/internal/unpriv"
)

// ErrPrivileged is wrapped by the error Run returns when Privileged is set
// but the bench is not root, so that its servers can only run as it does.
// Run returns it before it starts anything.
var ErrPrivileged = errors.New("cannot run the servers privileged: the bench is not root")

// geteuid is os.Geteuid; tests replace it to take the root and the
// non-root paths on any machine.
var geteuid = os.Geteuid

// launcher makes the command lines of a run's children (the servers, the
// floor's hog, the neighbour) and checks that they run as it says. It is
// not for concurrent use.
type launcher struct {
	exe string // Config.ServerCmd[0]
	// asService: the children run through unpriv.Wrap, from a copy of exe
	// that uid 65534 can run, made at the first start (command) and
	// removed by close.
	asService bool
	// server says how the children run, and note why, for the report
	// (ReportConfig.Server, ServerNote); privileged is whether as root.
	server, note string
	privileged   bool
	// shape is where the children run (shape.go).
	shape shape

	copied string
	remove func() error
}

// newLauncher returns the launcher of cfg's run; its error wraps
// ErrPrivileged where cfg asks for what this process cannot give.
func newLauncher(cfg Config) (*launcher, error) {
	l := &launcher{exe: cfg.ServerCmd[0]}
	var err error
	if l.shape, err = newShape(cfg); err != nil {
		return nil, err
	}
	euid := geteuid()
	const asService = "as a container runs a service (Docker's and Kubernetes' defaults)"
	switch {
	case cfg.Privileged && euid != 0:
		return nil, fmt.Errorf("%w (uid %d)", ErrPrivileged, euid)
	case cfg.Privileged:
		l.server, l.privileged = "privileged (root)", true
		l.note = "-privileged; without it they run " + unpriv.ServiceState().String() + ", " + asService
	case euid == 0 && runtime.GOOS != "linux":
		l.server, l.privileged = "privileged (root)", true
		l.note = "running them " + asService + " is Linux-only"
	case euid == 0:
		l.asService = true
		l.server = "unprivileged (" + unpriv.ServiceState().String() + ")"
		l.note = asService + ", the floor's hog and the neighbour too; -privileged runs them as root"
	default:
		self := fmt.Sprintf("uid %d", euid)
		if st, err := unpriv.Read(0); err == nil {
			self = st.String()
		}
		l.server = "unprivileged (" + self + ")"
		l.note = "the bench is not root, and its children run as it does"
	}
	return l, nil
}

// command returns the command line that runs exe with args as l's
// children run: as it is, or through unpriv.Wrap from the copy of exe.
func (l *launcher) command(args []string) (string, []string, error) {
	if !l.asService {
		return l.exe, args, nil
	}
	if l.copied == "" {
		path, err := exec.LookPath(l.exe)
		if err != nil {
			return "", nil, err
		}
		if l.copied, l.remove, err = unpriv.CopyExecutable(path); err != nil {
			return "", nil, err
		}
	}
	return l.copied, unpriv.Wrap(l.copied, args), nil
}

// place returns where a child of role runs, in cgroup cg (nil: bench's).
func (l *launcher) place(role childRole, cg *cpuCgroup) childPlace { return l.shape.place(role, cg) }

// check returns an error naming what differs if process pid (what it is,
// for the message), once it runs its program, does not run as l says, or
// not on the CPUs of place.
func (l *launcher) check(pid int, what string, place childPlace) error {
	if err := place.check(pid, what); err != nil {
		return err
	}
	if !l.asService {
		return nil
	}
	st, err := unpriv.Read(pid)
	if err == nil {
		err = st.Service()
	}
	if err != nil {
		return fmt.Errorf("%s (pid %d): %w", what, pid, err)
	}
	return nil
}

// close removes the copy of exe, once the children have exited.
func (l *launcher) close() error {
	if l.remove == nil {
		return nil
	}
	return l.remove()
}
