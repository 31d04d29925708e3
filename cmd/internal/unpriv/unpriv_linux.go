//go:build linux

package unpriv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Main is `cpusched unprivileged -- PROG ARGS...`, run as root: it makes
// this process as a container's service runs (the package comment) and
// execs PROG, an absolute path, in its place. It returns only on failure:
// a usage error, or what could not be dropped, set or checked.
func Main(args []string, stderr io.Writer) error {
	argv, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	if err := becomeService(); err != nil {
		return err
	}
	if err := syscall.Exec(argv[0], argv, os.Environ()); err != nil {
		return fmt.Errorf("exec %s as uid %d: %w", argv[0], UID, err)
	}
	return nil
}

// becomeService drops this process's privileges to a service's, in the
// order that keeps each step possible, and checks the result.
func becomeService() error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("needs root to become uid %d; this is uid %d", UID, uid)
	}
	parent := os.Getppid()
	var deathSig int32 // the kernel writes a C int
	if err := unix.Prctl(unix.PR_GET_PDEATHSIG, uintptr(unsafe.Pointer(&deathSig)), 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_GET_PDEATHSIG): %w", err)
	}
	// Lowering a limit takes no privilege, and execve keeps it: the
	// program starts with it.
	if err := unix.Setrlimit(unix.RLIMIT_NICE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("setrlimit(RLIMIT_NICE, 0): %w", err)
	}
	// The ambient set is the only one a non-root uid carries across
	// execve. (EINVAL: a kernel older than 4.3, which has none.)
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	// The groups and the gid before the uid, whose change gives up the
	// privilege to set them. syscall's calls apply to every thread; the
	// move from uid 0 to another clears the permitted and effective
	// capabilities.
	if err := syscall.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups([]): %w", err)
	}
	if err := syscall.Setresgid(GID, GID, GID); err != nil {
		return fmt.Errorf("setresgid(%d): %w", GID, err)
	}
	if err := syscall.Setresuid(UID, UID, UID); err != nil {
		return fmt.Errorf("setresuid(%d): %w", UID, err)
	}
	// A change of uid clears the parent-death signal (bench sets one,
	// childproc.DieWithParent): set it again, and stop if the parent has
	// already gone.
	if deathSig != 0 {
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(deathSig), 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_PDEATHSIG): %w", err)
		}
		if os.Getppid() != parent {
			return errors.New("the parent process has exited")
		}
	}
	// The parent's working directory may be closed to uid 65534.
	if err := os.Chdir("/"); err != nil {
		return err
	}
	return CheckService(0)
}
