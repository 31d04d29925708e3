package bench

// The servers' CPU quota (Config.CPUQuota). Each server runs in a cgroup of
// its own with a CFS bandwidth limit, created before the server starts and
// removed once it has exited. The server must be in the cgroup from its
// first instruction, because the Go runtime reads the limit only at start-up
// (Go 1.25+ sets GOMAXPROCS to max(2, ceil(limit)), capped at NumCPU, when
// the GOMAXPROCS variable is unset): cgroup_linux.go starts it through a
// shell that moves itself into the cgroup and then execs the server.
//
// The writer here is plain file I/O on a cgroup mount, with mkdir and rmdir
// injected, so that tests can run it against a directory tree that plays
// the kernel's part.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// ErrCPUQuota is wrapped by the error Run returns when CPUQuota is set but
// no cgroup with that limit can be made here (not Linux, not root, a
// read-only cgroup mount, no cpu controller). Run returns it before it
// starts anything.
var ErrCPUQuota = errors.New("cannot run the servers under a CPU quota")

// ErrCgroups is wrapped by the error Run returns when Cgroups is set but
// cgroups cannot be made here, for the same reasons; Run returns it before
// it starts anything.
var ErrCgroups = errors.New("cannot run the server and the neighbour in cgroups of their own")

// openCPUQuota is openCgroups for CPUQuota: its error wraps ErrCPUQuota.
func openCPUQuota(cpus float64) (*cgroupFS, error) {
	fs, err := openCgroups(cpus, "-cpu-quota")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCPUQuota, err)
	}
	return fs, nil
}

// MinCPUQuota is the smallest Config.CPUQuota, in CPUs; the largest is
// runtime.NumCPU().
const MinCPUQuota = 0.1

// cfsPeriodUs is the bandwidth period of every cgroup made here: the
// kernel's default, 100 ms. The quota is CPUQuota times this, per period.
const cfsPeriodUs = 100000

// cgroupNamePrefix starts the name of every cgroup made here; the rest is
// the benchmark's pid and a sequence number, so that cgroups left behind by
// a benchmark that was killed can be recognized and removed.
const cgroupNamePrefix = "cpusched-bench-"

// cgroupFS is a cgroup mount with a cpu controller to make cgroups in.
type cgroupFS struct {
	// dir is the directory new cgroups go in: the cgroup2 mount, or the
	// cgroup v1 cpu hierarchy's mount.
	dir string
	// v2 is true for cgroup2 (cpu.max), false for v1 (cpu.cfs_*_us).
	v2 bool
	// mkdir and rmdir create and remove one cgroup directory: os.Mkdir and
	// os.Remove on a real mount, where the kernel fills the new directory
	// with its interface files and takes them away again.
	mkdir func(dir string) error
	rmdir func(dir string) error
}

// String describes fs for the report, e.g. "cgroup v1 /sys/fs/cgroup/cpu".
func (fs *cgroupFS) String() string {
	if fs.v2 {
		return "cgroup v2 " + fs.dir
	}
	return "cgroup v1 " + fs.dir
}

// cgroupMount is where the cgroup file systems are mounted; tests point it
// at a fake tree.
var cgroupMount = "/sys/fs/cgroup"

// findCgroupFS looks for a cpu controller under mount (/sys/fs/cgroup):
// cgroup v2 if mount is a cgroup2 mount (it has cgroup.controllers) whose
// root lists cpu in cgroup.subtree_control, else the cgroup v1 cpu
// hierarchy at mount/cpu. The error says what is missing.
func findCgroupFS(mount string) (*cgroupFS, error) {
	if controllers, err := os.ReadFile(filepath.Join(mount, "cgroup.controllers")); err == nil {
		fs := &cgroupFS{dir: mount, v2: true, mkdir: mkdirCgroup, rmdir: os.Remove}
		if !hasWord(controllers, "cpu") {
			return nil, fmt.Errorf("%s is cgroup v2 without the cpu controller (cgroup.controllers: %q)", mount, strings.TrimSpace(string(controllers)))
		}
		subtree, err := os.ReadFile(filepath.Join(mount, "cgroup.subtree_control"))
		if err != nil {
			return nil, err
		}
		if !hasWord(subtree, "cpu") {
			return nil, fmt.Errorf("the cpu controller is not enabled for %s's children (enable it with: echo +cpu > %s)", mount, filepath.Join(mount, "cgroup.subtree_control"))
		}
		return fs, nil
	}
	v1 := filepath.Join(mount, "cpu")
	if _, err := os.Stat(filepath.Join(v1, "cpu.cfs_quota_us")); err != nil {
		return nil, fmt.Errorf("no cpu controller: %s is not a cgroup2 mount and %s has no cpu.cfs_quota_us", mount, v1)
	}
	return &cgroupFS{dir: v1, mkdir: mkdirCgroup, rmdir: os.Remove}, nil
}

func mkdirCgroup(dir string) error { return os.Mkdir(dir, 0o755) }

// hasWord reports whether the space-separated list has word.
func hasWord(list []byte, word string) bool {
	for _, w := range strings.Fields(string(list)) {
		if w == word {
			return true
		}
	}
	return false
}

// cpuCgroup is a cgroup made by create, with a CPU bandwidth limit.
type cpuCgroup struct {
	fs  *cgroupFS
	dir string
}

// quotaUs returns the quota create writes for cpus CPUs: microseconds per
// cfsPeriodUs (cpu.max's first field on v2, cpu.cfs_quota_us on v1).
func quotaUs(cpus float64) int64 { return int64(math.Round(cpus * cfsPeriodUs)) }

// create makes the cgroup fs.dir/name limited to cpus CPUs, or with no
// limit for cpus 0 (a new cgroup has none, and the kernel's default
// weight: cpu.shares 1024 on v1, cpu.weight 100 on v2). On failure it
// removes the directory again (if it made it) and returns an error that
// names the file.
func (fs *cgroupFS) create(name string, cpus float64) (*cpuCgroup, error) {
	g := &cpuCgroup{fs: fs, dir: filepath.Join(fs.dir, name)}
	if err := fs.mkdir(g.dir); err != nil {
		return nil, fmt.Errorf("creating the cgroup: %w", err)
	}
	var err error
	switch {
	case cpus == 0:
	case fs.v2:
		err = writeCgroupFile(g.dir, "cpu.max", fmt.Sprintf("%d %d", quotaUs(cpus), cfsPeriodUs))
	default:
		err = writeCgroupFile(g.dir, "cpu.cfs_period_us", strconv.Itoa(cfsPeriodUs))
		if err == nil {
			err = writeCgroupFile(g.dir, "cpu.cfs_quota_us", strconv.FormatInt(quotaUs(cpus), 10))
		}
	}
	if err != nil {
		_ = g.remove()
		return nil, err
	}
	return g, nil
}

// createWeighted makes the cgroup fs.dir/name, without a limit, with the
// CPU weight weight on cgroup v2's scale (1..10000, the kernel's default
// 100, as cpusched's group weights): cpu.weight on v2, cpu.shares
// weight*1024/100 on v1 (whose default 1024 stands for 100). The kernel
// shares the CPU between sibling cgroups by these weights whatever the
// threads inside them are (SCHED_IDLE ones too). On failure it removes
// the directory again and returns an error that names the file.
func (fs *cgroupFS) createWeighted(name string, weight int) (*cpuCgroup, error) {
	g, err := fs.create(name, 0)
	if err != nil {
		return nil, err
	}
	file, value := fs.weightFile(weight)
	if err := writeCgroupFile(g.dir, file, value); err != nil {
		_ = g.remove()
		return nil, err
	}
	return g, nil
}

// sub returns the cgroups below g, a cgroup made by create or
// createWeighted with no process in it, for cgroups of its own; on
// cgroup v2 it first enables the cpu controller for g's children
// (cgroup.subtree_control), which v1 needs not.
func (g *cpuCgroup) sub() (*cgroupFS, error) {
	if g.fs.v2 {
		if err := writeCgroupFile(g.dir, "cgroup.subtree_control", "+cpu"); err != nil {
			return nil, err
		}
	}
	return &cgroupFS{dir: g.dir, v2: g.fs.v2, mkdir: g.fs.mkdir, rmdir: g.fs.rmdir}, nil
}

// weightFile returns the file and value that give a cgroup of fs the
// weight weight (createWeighted).
func (fs *cgroupFS) weightFile(weight int) (file, value string) {
	if fs.v2 {
		return "cpu.weight", strconv.Itoa(weight)
	}
	// v1's range is 2..262144 (the kernel's MIN_SHARES, MAX_SHARES).
	return "cpu.shares", strconv.Itoa(min(max((weight*1024+50)/100, 2), 262144))
}

// writeCgroupFile writes value to an existing interface file of a cgroup
// (never creating one: a missing file means the controller is missing).
func writeCgroupFile(dir, file, value string) error {
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.WriteString(value); err != nil {
		f.Close()
		return fmt.Errorf("writing %q to %s: %w", value, path, err)
	}
	return f.Close()
}

// procsFile is the file a process writes its pid to, to move into g.
func (g *cpuCgroup) procsFile() string { return filepath.Join(g.dir, "cgroup.procs") }

// inCgroupScript moves the shell that runs it into the cgroup whose
// cgroup.procs is $1, then execs the rest of its arguments, which so start
// inside the cgroup with the shell's pid, process group and parent-death
// signal. Status 126 (the shell's "cannot execute") if the move fails.
const inCgroupScript = `echo $$ > "$1" || exit 126; shift; exec "$@"`

// inCgroup returns the command line (for exec.Command) that runs name with
// args inside g.
func (g *cpuCgroup) inCgroup(name string, args []string) (string, []string) {
	return "/bin/sh", append([]string{"-c", inCgroupScript, "cpusched-bench", g.procsFile(), name}, args...)
}

// check makes a cgroup limited to cpus CPUs (0: no limit), moves a
// short-lived shell into it and removes it again: what Run needs for every
// server, tried before any server starts.
func (fs *cgroupFS) check(cpus float64) error {
	g, err := fs.create(nextCgroupName(), cpus)
	if err != nil {
		return err
	}
	name, args := g.inCgroup("true", nil)
	out, runErr := exec.Command(name, args...).CombinedOutput()
	if err := g.remove(); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("moving a process into %s: %v: %s", g.dir, runErr, bytes.TrimSpace(out))
	}
	return nil
}

// cgroupSeq numbers the cgroups this process makes.
var cgroupSeq atomic.Int64

// nextCgroupName returns a new cgroup name: cgroupNamePrefix, this
// process's pid and a sequence number.
func nextCgroupName() string {
	return fmt.Sprintf("%s%d-%d", cgroupNamePrefix, os.Getpid(), cgroupSeq.Add(1))
}

// removeTimeout bounds remove's retries: a cgroup stays busy for a moment
// after its last process has been reaped. Tests shorten it.
var removeTimeout = 2 * time.Second

// remove removes g's directory, retrying while the kernel still counts a
// process in it. Call it once the processes in g have exited.
func (g *cpuCgroup) remove() error {
	deadline := time.Now().Add(removeTimeout)
	for {
		err := g.fs.rmdir(g.dir)
		if err == nil || errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("removing the cgroup %s: %w", g.dir, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// CgroupCPUStat is a server cgroup's CFS bandwidth accounting over a
// step's measured window: the difference of cpu.stat at its two ends.
type CgroupCPUStat struct {
	// Periods is the number of 100 ms bandwidth periods in which the
	// cgroup had threads wanting to run (nr_periods).
	Periods int64 `json:"nr_periods"`
	// Throttled is the number of those periods at whose end the cgroup had
	// used its quota and was stopped until the next one (nr_throttled).
	Throttled int64 `json:"nr_throttled"`
	// ThrottledMs is the time the cgroup's run queues spent throttled,
	// summed over the CPUs (throttled_time on v1, throttled_usec on v2).
	ThrottledMs float64 `json:"throttled_ms"`
	// ServerCPUs is the CPU time the server process used over the window
	// divided by the window's length (/proc/PID/stat, 10 ms ticks): how
	// much of the quota it used.
	ServerCPUs float64 `json:"server_cpus"`
}

// cpuStat is one reading of a cgroup's cpu.stat, with the server process's
// CPU time.
type cpuStat struct {
	periods, throttled int64
	throttledTime      time.Duration
	serverCPU          time.Duration
}

// readStat reads g's cpu.stat.
func (g *cpuCgroup) readStat() (cpuStat, error) {
	data, err := os.ReadFile(filepath.Join(g.dir, "cpu.stat"))
	if err != nil {
		return cpuStat{}, err
	}
	return parseCPUStat(data)
}

// parseCPUStat parses cpu.stat, v1 (throttled_time in ns) or v2
// (throttled_usec). A file without nr_periods is an error.
func parseCPUStat(data []byte) (cpuStat, error) {
	var s cpuStat
	found := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return s, fmt.Errorf("cpu.stat: %s: %w", key, err)
		}
		switch key {
		case "nr_periods":
			s.periods, found = n, true
		case "nr_throttled":
			s.throttled = n
		case "throttled_time":
			s.throttledTime = time.Duration(n)
		case "throttled_usec":
			s.throttledTime = time.Duration(n) * time.Microsecond
		}
	}
	if !found {
		return s, fmt.Errorf("cpu.stat has no nr_periods: %q", data)
	}
	return s, nil
}

// since returns the accounting from earlier to s, window apart.
func (s cpuStat) since(earlier cpuStat, window time.Duration) *CgroupCPUStat {
	cs := &CgroupCPUStat{
		Periods:     s.periods - earlier.periods,
		Throttled:   s.throttled - earlier.throttled,
		ThrottledMs: float64(s.throttledTime-earlier.throttledTime) / 1e6,
	}
	if window > 0 {
		cs.ServerCPUs = (s.serverCPU - earlier.serverCPU).Seconds() / window.Seconds()
	}
	return cs
}

// parseProcCPUTime returns the user plus system CPU time in a /proc/PID/stat
// line, whose ticks are USER_HZ, 100 per second on Linux.
func parseProcCPUTime(stat []byte) (time.Duration, error) {
	// "pid (comm) state ppid ...": comm may hold spaces; the fields after
	// the last ')' start with the state, field 3; utime and stime are 14
	// and 15.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 13 {
		return 0, fmt.Errorf("malformed /proc/PID/stat: %q", stat)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("malformed /proc/PID/stat: %q", stat)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
