// Package cgroupcpu reads the CPU bandwidth limit (the CFS quota) that
// applies to this process: cgroup v1's cpu.cfs_quota_us over
// cpu.cfs_period_us, or cgroup v2's cpu.max, of the process's cpu cgroup
// and of each of its ancestors, the smallest of them. It is what a
// container's CPU limit (docker --cpus, a Kubernetes CPU limit) becomes on
// the host, and what the Go runtime (1.25+) sets GOMAXPROCS from.
//
// It reads /proc/self/cgroup to find the process's cgroup,
// /proc/self/mountinfo to find where that hierarchy is mounted, and then the
// limit files. The standard library only: the core package imports it.
package cgroupcpu

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Limit returns the CPU limit that applies to this process, in CPUs (1.5
// for a quota of 150 ms per 100 ms period), and ok false if there is none
// (no cgroup cpu controller, no quota set on the process's cgroup or its
// ancestors, or not Linux). An error means a file was there but could not
// be read or parsed; it names the file.
func Limit() (cpus float64, ok bool, err error) {
	_, cpus, ok, err = limitUnder("/")
	return cpus, ok, err
}

// StatFile returns the cpu.stat file of the cgroup whose limit Limit
// returns (the one with the smallest), ok false where Limit's is.
func StatFile() (path string, ok bool, err error) {
	dir, _, ok, err := limitUnder("/")
	if !ok || err != nil {
		return "", false, err
	}
	return filepath.Join(dir, "cpu.stat"), true, nil
}

// Throttling reads a cpu.stat file (cgroup v1 or v2): the quota's periods
// in which the cgroup ran, and those in which it used its quota and every
// thread of it was stopped until the period's end.
func Throttling(path string) (periods, throttled int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	foundP, foundT := false, false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || key != "nr_periods" && key != "nr_throttled" {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %s: want an integer, got %q", path, key, val)
		}
		if key == "nr_periods" {
			periods, foundP = n, true
		} else {
			throttled, foundT = n, true
		}
	}
	if !foundP || !foundT {
		return 0, 0, fmt.Errorf("%s: want nr_periods and nr_throttled", path)
	}
	return periods, throttled, nil
}

// limitUnder is Limit with every path under root, so that tests can give a
// fake /proc and cgroup tree; it also returns the directory of the cgroup
// whose limit it is.
func limitUnder(root string) (string, float64, bool, error) {
	cg, mi, found, err := readSelf(root)
	if !found || err != nil {
		return "", 0, false, err
	}
	v1Path, v2Path, hasV1, hasV2 := parseCgroupFile(cg)
	mounts := parseMountinfo(mi)
	// A cpu controller on a v1 hierarchy is the one that limits the
	// process; the v2 hierarchy has it only when no v1 hierarchy does.
	if m, ok := mounts.v1cpu(); hasV1 && ok {
		return walkUp(root, m, v1Path, readV1)
	}
	if m, ok := mounts.v2(); hasV2 && ok {
		return walkUp(root, m, v2Path, readV2)
	}
	return "", 0, false, nil
}

// parseCgroupFile reads /proc/self/cgroup's "id:controllers:path" lines:
// the path of the v1 hierarchy whose controllers include cpu, and the path
// in the v2 hierarchy (id 0, no controllers).
func parseCgroupFile(b []byte) (v1, v2 string, hasV1, hasV2 bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			v2, hasV2 = parts[2], true
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == "cpu" {
				v1, hasV1 = parts[2], true
			}
		}
	}
	return v1, v2, hasV1, hasV2
}

// mount is one cgroup mount from /proc/self/mountinfo: the path inside the
// hierarchy that is mounted (not "/" inside a cgroup namespace or a bind
// mount) and where.
type mount struct {
	root, point string
}

type mountTable struct {
	cpuV1, cgroup2 []mount
}

// parseMountinfo keeps the cgroup v1 mounts with the cpu controller and the
// cgroup2 mounts. A line is "id parent maj:min root point options
// [optional...] - fstype source superoptions".
func parseMountinfo(b []byte) mountTable {
	var t mountTable
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		before, after, found := strings.Cut(sc.Text(), " - ")
		if !found {
			continue
		}
		f, g := strings.Fields(before), strings.Fields(after)
		if len(f) < 5 || len(g) < 3 {
			continue
		}
		m := mount{root: unescape(f[3]), point: unescape(f[4])}
		switch g[0] {
		case "cgroup2":
			t.cgroup2 = append(t.cgroup2, m)
		case "cgroup":
			for _, o := range strings.Split(g[2], ",") {
				if o == "cpu" {
					t.cpuV1 = append(t.cpuV1, m)
				}
			}
		}
	}
	return t
}

// dirOf returns where, under root, the mount m and the cgroup at path
// (as /proc/self/cgroup names it) are; ok is false where that cgroup is
// outside what is mounted there (a cgroup namespace whose root is not
// mounted): nothing to read.
func (m mount) dirOf(root, path string) (top, dir string, ok bool) {
	rel, ok := strings.CutPrefix(path, m.root)
	if !ok {
		return "", "", false
	}
	top = filepath.Join(root, m.point)
	return top, filepath.Join(top, rel), true
}

func (t mountTable) v1cpu() (mount, bool) { return first(t.cpuV1) }
func (t mountTable) v2() (mount, bool)    { return first(t.cgroup2) }

func first(ms []mount) (mount, bool) {
	if len(ms) == 0 {
		return mount{}, false
	}
	return ms[0], true
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// readLimit reads one cgroup directory's limit: ok false when it has none
// (or no limit files, as the v2 root).
type readLimit func(dir string) (cpus float64, ok bool, err error)

// walkUp returns the smallest limit of the cgroup at path (as
// /proc/self/cgroup names it) and its ancestors up to the mount m, and
// the directory of the cgroup that sets it.
func walkUp(root string, m mount, path string, read readLimit) (string, float64, bool, error) {
	top, dir, ok := m.dirOf(root, path)
	if !ok {
		return "", 0, false, nil
	}
	bestDir, best, found := "", 0.0, false
	for {
		cpus, ok, err := read(dir)
		if err != nil {
			return "", 0, false, err
		}
		if ok && (!found || cpus < best) {
			bestDir, best, found = dir, cpus, true
		}
		if dir == top || len(dir) < len(top) {
			return bestDir, best, found, nil
		}
		dir = filepath.Dir(dir)
	}
}

// readV1 reads cpu.cfs_quota_us (-1: no limit) and cpu.cfs_period_us.
func readV1(dir string) (float64, bool, error) {
	quota, err := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil || quota < 0 {
		return 0, false, err
	}
	period, err := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
	if err != nil {
		return 0, false, err
	}
	return ratio(filepath.Join(dir, "cpu.cfs_quota_us")+" over cpu.cfs_period_us", quota, period)
}

// readV2 reads cpu.max: "max PERIOD" (no limit) or "QUOTA PERIOD".
func readV2(dir string) (float64, bool, error) {
	name := filepath.Join(dir, "cpu.max")
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, false, fmt.Errorf("%s: want \"QUOTA PERIOD\" or \"max PERIOD\", got %q", name, strings.TrimSpace(string(b)))
	}
	if f[0] == "max" {
		return 0, false, nil
	}
	quota, err1 := strconv.ParseInt(f[0], 10, 64)
	period, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false, fmt.Errorf("%s: want two integers, got %q", name, strings.TrimSpace(string(b)))
	}
	return ratio(name, quota, period)
}

func ratio(where string, quota, period int64) (float64, bool, error) {
	if quota <= 0 || period <= 0 {
		return 0, false, fmt.Errorf("%s: quota %d and period %d must be positive", where, quota, period)
	}
	return float64(quota) / float64(period), true, nil
}

func readInt(name string) (int64, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: want an integer, got %q", name, strings.TrimSpace(string(b)))
	}
	return n, nil
}

// GroupCPU returns the CPU time that every process of the cgroup whose
// cpu.stat is statPath (StatFile's) has used: cgroup v2's usage_usec in
// that file, or in cgroup v1 the cpuacct.usage beside it where cpuacct is
// mounted with cpu, else the sum over the cgroup's processes
// (cgroup.procs) of their user and system time from /proc, which leaves
// out the processes that have exited. ok is false where none of these can
// be read.
func GroupCPU(statPath string) (cpu time.Duration, ok bool) {
	return GroupCPUUpTo(statPath, -1)
}

// GroupCPUUpTo is GroupCPU, but where it would sum the processes' times
// and the cgroup has more than maxProcs processes (maxProcs >= 0), it
// reports ok false rather than read a file per process: for a caller
// that reads it often.
func GroupCPUUpTo(statPath string, maxProcs int) (cpu time.Duration, ok bool) {
	if b, err := os.ReadFile(statPath); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, found := strings.CutPrefix(sc.Text(), "usage_usec "); found {
				if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
					return time.Duration(n) * time.Microsecond, true
				}
			}
		}
	}
	dir := filepath.Dir(statPath)
	if n, err := readInt(filepath.Join(dir, "cpuacct.usage")); err == nil {
		return time.Duration(n), true
	}
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return 0, false
	}
	pids := strings.Fields(string(procs))
	if maxProcs >= 0 && len(pids) > maxProcs {
		return 0, false
	}
	for _, pid := range pids {
		if ticks, ok := processTicks(pid); ok {
			cpu += time.Duration(ticks) * time.Second / userHZ
		}
	}
	return cpu, true
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// architecture Linux runs Go on.
const userHZ = 100

// processTicks returns the user and system time of process pid from
// /proc/PID/stat, in USER_HZ ticks.
func processTicks(pid string) (int64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: the fields
	// after it start at the last ')'. utime and stime are fields 14 and
	// 15, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return utime + stime, true
}
