// Package unpriv runs a child process as a container runs a service: uid
// and gid 65534 (nobody), no supplementary groups, no capabilities, and
// RLIMIT_NICE 0, Docker's and Kubernetes' defaults. `cpusched bench`
// starts its servers so when it runs as root: there a thread cpusched
// lowers to SCHED_IDLE can never be raised back (no CAP_SYS_NICE, and an
// RLIMIT_NICE that allows no raise), and the library takes another path
// (cpusched.Stats.ThreadsRaisable).
//
// The child runs as `cpusched unprivileged -- PROG ARGS...` (Command),
// started as root, which drops what a service lacks and then execs PROG
// in its place, keeping its pid, process group and parent. Why not
// exec.Cmd's SysProcAttr.Credential in the parent:
//
//   - RLIMIT_NICE must hold from PROG's first instruction, as cpusched.New
//     probes once whether it can raise a thread. os/exec cannot set a
//     child's limit between fork and execve, and a prlimit on the child
//     after Start races with its start-up. Lowering one's own limit needs
//     no privilege, so the wrapper sets it before its exec, and PROG
//     inherits it.
//   - With -cgroups or -cpu-quota, bench starts its children through a
//     shell that moves itself into a cgroup before it execs them (its
//     cgroup.go): that takes root, which a child already running as 65534
//     would not have. The wrapper comes after that shell.
//
// The wrapper also clears the ambient capabilities (the only ones a
// non-root uid keeps across execve), re-arms the parent-death signal that
// the change of uid clears, checks the result from /proc/self before it
// execs, and moves to / (the parent's directory may not be readable).
package unpriv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/cli"
)

// Command is the hidden command that runs the rest of its command line as
// a service: `cpusched unprivileged -- PROG ARGS...`.
const Command = "unprivileged"

// UID and GID are what the child runs as: nobody's, 65534, as
// `setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all`.
const (
	UID = 65534
	GID = 65534
)

// capSysNice is CAP_SYS_NICE's bit in a capability set
// (linux/capability.h).
const capSysNice = 23

// Wrap returns the arguments that make a cpusched binary, run as root, run
// prog with args as a service: "unprivileged -- prog args...". prog must
// be an absolute path that UID can execute (CopyExecutable).
func Wrap(prog string, args []string) []string {
	return append([]string{Command, "--", prog}, args...)
}

// parseArgs returns the command line Main runs, PROG ARGS..., from its
// arguments "-- PROG ARGS..." (the "--" may be left out).
func parseArgs(args []string, stderr io.Writer) ([]string, error) {
	fs := cli.NewFlagSet(Command, stderr)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: cpusched %s -- PROG [ARGS...] (as root: PROG runs as uid and gid %d, no groups, no capabilities, RLIMIT_NICE 0)\n", Command, UID)
	}
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() == 0:
		return nil, cli.Usagef("no command to run: cpusched %s -- PROG [ARGS...]", Command)
	case !filepath.IsAbs(fs.Arg(0)):
		return nil, cli.Usagef("PROG must be an absolute path, got %q", fs.Arg(0))
	}
	return fs.Args(), nil
}

// State is how a process runs, as /proc/PID/status and /proc/PID/limits
// say: its user and group ids (real, effective, saved, filesystem), its
// supplementary groups, capability sets and RLIMIT_NICE.
type State struct {
	UIDs, GIDs             [4]int
	Groups                 int // supplementary groups
	CapPrm, CapEff, CapAmb uint64
	// NiceSoft and NiceHard are RLIMIT_NICE's limits; -1 for unlimited.
	NiceSoft, NiceHard int64
}

// Service reports whether s is what the wrapper makes: every uid UID,
// every gid GID, no supplementary group, no capability permitted,
// effective or ambient, and RLIMIT_NICE 0. If not, the error says what
// differs.
func (s State) Service() error {
	var bad []string
	if s.UIDs != [4]int{UID, UID, UID, UID} {
		bad = append(bad, fmt.Sprintf("uids %v", s.UIDs))
	}
	if s.GIDs != [4]int{GID, GID, GID, GID} {
		bad = append(bad, fmt.Sprintf("gids %v", s.GIDs))
	}
	if s.Groups != 0 {
		bad = append(bad, fmt.Sprintf("%d supplementary groups", s.Groups))
	}
	if s.CapPrm|s.CapEff|s.CapAmb != 0 {
		bad = append(bad, fmt.Sprintf("capabilities permitted %#x, effective %#x, ambient %#x", s.CapPrm, s.CapEff, s.CapAmb))
	}
	if s.NiceSoft != 0 || s.NiceHard != 0 {
		bad = append(bad, fmt.Sprintf("RLIMIT_NICE %d/%d", s.NiceSoft, s.NiceHard))
	}
	if len(bad) > 0 {
		return fmt.Errorf("not as a service runs (uid and gid %d, no groups, no capabilities, RLIMIT_NICE 0): %s", UID, strings.Join(bad, ", "))
	}
	return nil
}

// String describes what decides whether the process may raise a thread's
// priority: "uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0".
func (s State) String() string {
	nice := "no CAP_SYS_NICE"
	if s.CapEff&(1<<capSysNice) != 0 {
		nice = "CAP_SYS_NICE"
	}
	limit := "unlimited"
	if s.NiceSoft >= 0 {
		limit = strconv.FormatInt(s.NiceSoft, 10)
	}
	return fmt.Sprintf("uid %d, %s, RLIMIT_NICE %s", s.UIDs[1], nice, limit)
}

// ServiceState is the State the wrapper makes, for descriptions.
func ServiceState() State {
	return State{UIDs: [4]int{UID, UID, UID, UID}, GIDs: [4]int{GID, GID, GID, GID}}
}

// CheckService reads the State of process pid (0: this process) and
// returns nil if it is what the wrapper makes (State.Service), else an
// error saying what differs or why it could not be read.
func CheckService(pid int) error {
	st, err := Read(pid)
	if err != nil {
		return err
	}
	return st.Service()
}

// Read returns the State of process pid (0: this process) from /proc.
func Read(pid int) (State, error) {
	proc := "/proc/self"
	if pid != 0 {
		proc = "/proc/" + strconv.Itoa(pid)
	}
	var s State
	status, err := os.ReadFile(proc + "/status")
	if err != nil {
		return s, err
	}
	limits, err := os.ReadFile(proc + "/limits")
	if err != nil {
		return s, err
	}
	if err := s.parseStatus(status); err != nil {
		return s, fmt.Errorf("%s/status: %w", proc, err)
	}
	if s.NiceSoft, s.NiceHard, err = parseNiceLimit(limits); err != nil {
		return s, fmt.Errorf("%s/limits: %w", proc, err)
	}
	return s, nil
}

// parseStatus fills s's ids, groups and capabilities from a
// /proc/PID/status file.
func (s *State) parseStatus(status []byte) error {
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		fields := strings.Fields(val)
		var err error
		switch key {
		case "Uid":
			err = parseIDs(fields, &s.UIDs)
		case "Gid":
			err = parseIDs(fields, &s.GIDs)
		case "Groups":
			s.Groups = len(fields)
		case "CapPrm":
			s.CapPrm, err = parseCaps(fields)
		case "CapEff":
			s.CapEff, err = parseCaps(fields)
		case "CapAmb":
			s.CapAmb, err = parseCaps(fields)
		default:
			continue
		}
		if err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		found++
	}
	if found < 6 {
		return errors.New("no Uid, Gid, Groups, CapPrm, CapEff or CapAmb line")
	}
	return nil
}

func parseIDs(fields []string, ids *[4]int) error {
	if len(fields) != 4 {
		return fmt.Errorf("got %q, want 4 ids", fields)
	}
	for i, f := range fields {
		n, err := strconv.Atoi(f)
		if err != nil {
			return err
		}
		ids[i] = n
	}
	return nil
}

func parseCaps(fields []string) (uint64, error) {
	if len(fields) != 1 {
		return 0, fmt.Errorf("got %q, want one hex mask", fields)
	}
	return strconv.ParseUint(fields[0], 16, 64)
}

// parseNiceLimit returns RLIMIT_NICE's soft and hard limits from a
// /proc/PID/limits file ("Max nice priority  0  0"), -1 for unlimited.
func parseNiceLimit(limits []byte) (soft, hard int64, err error) {
	const name = "Max nice priority"
	sc := bufio.NewScanner(bytes.NewReader(limits))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), name)
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return 0, 0, fmt.Errorf("%q: want a soft and a hard limit", sc.Text())
		}
		if soft, err = parseLimit(f[0]); err == nil {
			hard, err = parseLimit(f[1])
		}
		return soft, hard, err
	}
	return 0, 0, fmt.Errorf("no %q line", name)
}

func parseLimit(s string) (int64, error) {
	if s == "unlimited" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// CopyExecutable copies the program at path into a new directory under
// os.TempDir() that every user may enter, both of mode 0755, so that UID
// can run it: `go run` builds into a directory only its user can enter.
// remove removes the copy and its directory. It fails if a directory
// above the copy cannot be searched by every user (set TMPDIR to one that
// can).
func CopyExecutable(path string) (copied string, remove func() error, err error) {
	src, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer src.Close()
	dir, err := os.MkdirTemp("", "cpusched-unprivileged-")
	if err != nil {
		return "", nil, err
	}
	remove = func() error { return os.RemoveAll(dir) }
	fail := func(err error) (string, func() error, error) {
		_ = remove()
		return "", nil, fmt.Errorf("copying %s for uid %d: %w", path, UID, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(err)
	}
	if err := searchable(filepath.Dir(dir)); err != nil {
		return fail(err)
	}
	copied = filepath.Join(dir, filepath.Base(path))
	dst, err := os.OpenFile(copied, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return fail(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return fail(err)
	}
	if err := dst.Close(); err != nil {
		return fail(err)
	}
	return copied, remove, nil
}

// searchable checks that every user may search dir and each directory
// above it.
func searchable(dir string) error {
	for {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s (mode %v) cannot be searched by other users: set TMPDIR to a directory they can reach", dir, fi.Mode().Perm())
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return nil
		}
		dir = parent
	}
}
