// Package cpuscope reads, for cpusched's guard against outside contention,
// how busy the CPUs are that this process may run on, how long the
// threads of its cgroup waited for one, and whether one of its threads is
// waiting for one now: the per-CPU lines of /proc/stat, the cpu.pressure
// of the process's cgroup v2, and a thread's schedstat and stat files.
// Every path is under a root, "/" in production, so that tests can lay out
// a fake machine. Which CPUs the process may run on (its affinity) is the
// caller's to give.
package cpuscope

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cpusched/cpusched/internal/cgroupcpu"
)

// userHZ is the unit of /proc/stat's times: USER_HZ, 100 on every Linux
// architecture Go supports.
const userHZ = 100

// Reader reads the files under one root. Make one with New; a Reader is
// not safe for concurrent use.
type Reader struct {
	root     string
	pressure string // the cgroup's cpu.pressure; "" where it has none
	looked   bool   // pressure has been looked for
}

// New returns a Reader of the files under root ("/" for the real ones).
// It reads nothing yet.
func New(root string) *Reader { return &Reader{root: root} }

// Sample is one reading of the CPUs the process may run on.
type Sample struct {
	// CPUs is how many CPUs were read, and Busy the time they have spent
	// busy since boot (ns, in steps of 10 ms: /proc/stat counts USER_HZ
	// ticks): user, nice, system, irq, softirq and steal, every time but
	// idle and iowait. Set identifies the CPUs read: the Busy of two
	// samples may be subtracted only where their Sets are equal.
	CPUs int
	Busy int64
	Set  uint64
	// Stall is the time in which some runnable thread of the process's
	// cgroup waited for a CPU, since the cgroup was made (ns; the "some"
	// total of its cpu.pressure). StallOK is false where it has none:
	// cgroup v1 alone, a process in the v2 hierarchy's root (whose
	// cpu.pressure is the whole machine's), a kernel without pressure
	// accounting.
	Stall   int64
	StallOK bool
}

// Read reads the CPUs in allowed (the process's affinity, as
// sched_getaffinity gives it), and the cgroup's cpu.pressure; ok is false
// where /proc/stat cannot be read. Where /proc/stat lists none of allowed
// (allowed is empty, or /proc/stat numbers the CPUs its own way, as lxcfs
// does in a container), it reads every CPU /proc/stat lists.
func (r *Reader) Read(allowed []int) (s Sample, ok bool) {
	data, err := os.ReadFile(filepath.Join(r.root, "proc/stat"))
	if err != nil {
		return Sample{}, false
	}
	in := make(map[int]bool, len(allowed))
	for _, c := range allowed {
		in[c] = true
	}
	s.Set = fnvOffset
	every := Sample{Set: fnvOffset}
	for rest := data; len(rest) > 0; {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		cpu, busy, isCPU := parseCPULine(line)
		if !isCPU {
			break // the CPUs' lines come first
		}
		if cpu < 0 {
			continue // the first line, the sum of them all
		}
		every.add(cpu, busy)
		if in[cpu] {
			s.add(cpu, busy)
		}
	}
	if s.CPUs == 0 {
		s = every
	}
	if s.CPUs == 0 {
		return Sample{}, false
	}
	s.Stall, s.StallOK = r.stall()
	return s, true
}

// add counts CPU cpu, busy for busy ns, in s.
func (s *Sample) add(cpu int, busy int64) {
	s.CPUs++
	s.Busy += busy
	s.Set = (s.Set ^ uint64(cpu)) * fnvPrime
}

// A Sample's Set is the FNV-1a hash of its CPUs' numbers, in /proc/stat's
// order.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// parseCPULine parses a line of /proc/stat: "cpuN user nice system idle
// iowait irq softirq steal [guest guest_nice]" (guest times are inside
// user and nice), or "cpu ..." for the sum, whose cpu is -1. isCPU is
// false for any other line, or one that does not parse.
func parseCPULine(line []byte) (cpu int, busy int64, isCPU bool) {
	f := bytes.Fields(line)
	if len(f) < 9 {
		return 0, 0, false
	}
	name, found := bytes.CutPrefix(f[0], []byte("cpu"))
	if !found {
		return 0, 0, false
	}
	cpu = -1
	if len(name) > 0 {
		n, err := strconv.Atoi(string(name))
		if err != nil {
			return 0, 0, false
		}
		cpu = n
	}
	for i := 1; i <= 8; i++ {
		v, err := strconv.ParseInt(string(f[i]), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		if i != 4 && i != 5 { // idle, iowait
			busy += v
		}
	}
	return cpu, busy * (1e9 / userHZ), true
}

// stall reads the "some" total of the cgroup's cpu.pressure, looking for
// the file the first time. A cgroup v2 directory without cgroup.events
// is the hierarchy's real root, whose cpu.pressure counts every process
// of the machine: it is not read.
func (r *Reader) stall() (ns int64, ok bool) {
	if !r.looked {
		r.looked = true
		dir, found, err := cgroupcpu.V2Dir(r.root)
		if found && err == nil {
			if _, err := os.Stat(filepath.Join(dir, "cgroup.events")); err == nil {
				r.pressure = filepath.Join(dir, "cpu.pressure")
			}
		}
	}
	if r.pressure == "" {
		return 0, false
	}
	data, err := os.ReadFile(r.pressure)
	if err != nil {
		return 0, false
	}
	// "some avg10=0.00 avg60=0.00 avg300=0.00 total=N" (µs), then "full ...".
	line, _, _ := bytes.Cut(data, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) == 0 || string(f[0]) != "some" {
		return 0, false
	}
	for _, kv := range f[1:] {
		if v, found := bytes.CutPrefix(kv, []byte("total=")); found {
			us, err := strconv.ParseInt(string(v), 10, 64)
			return us * 1000, err == nil
		}
	}
	return 0, false
}

// ThreadWait reads thread tid of this process: its run delay, the time
// it has spent runnable but waiting for a CPU (ns; the second field of
// /proc/self/task/TID/schedstat), and whether it is runnable now (state R
// in its stat file, which is also what a running thread shows); ok is
// false where either file cannot be read. The kernel adds a wait to the
// run delay when it ends, as the thread gets a CPU: a thread that has
// waited since before the last reading and waits still shows no more
// delay, but shows R.
func (r *Reader) ThreadWait(tid int) (delay int64, runnable, ok bool) {
	dir := filepath.Join(r.root, "proc/self/task", strconv.Itoa(tid))
	sched, err := os.ReadFile(filepath.Join(dir, "schedstat"))
	if err != nil {
		return 0, false, false
	}
	f := bytes.Fields(sched)
	if len(f) < 2 {
		return 0, false, false
	}
	delay, err = strconv.ParseInt(string(f[1]), 10, 64)
	if err != nil {
		return 0, false, false
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return 0, false, false
	}
	// "TID (comm) S ...": the command may hold spaces and parentheses,
	// so the state is the first field after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false, false
	}
	state := bytes.Fields(stat[i+1:])
	if len(state) == 0 {
		return 0, false, false
	}
	return delay, string(state[0]) == "R", true
}
