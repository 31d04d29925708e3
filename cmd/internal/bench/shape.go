// The shape of machine the servers run in: the whole machine by default,
// or part of it, as services often get (Config.CPUSet,
// Config.ServerProcs), or a CPU quota (Config.CPUQuota, cgroup.go). The
// floor runs in the same shape as the modes, in the same run, so that
// every ratio to it compares like with like.
//
// How CPUSet confines the processes: with affinity masks
// (sched_setaffinity), not a cpuset cgroup. Each child gets its CPUs
// before its first instruction: it is forked from a goroutine locked to
// an OS thread whose mask is, for the fork, the child's CPUs (a child
// inherits its forking thread's state: os/exec's Cmd.Run), and keeps
// them across the execs of the cgroup shell and of `cpusched
// unprivileged`; bench reads /proc/PID/status once the child runs and
// stops the run if its Cpus_allowed_list differs. bench itself, the load
// generator, moves every thread of its own to the other CPUs for the run
// and back after it. Why not a cpuset cgroup: what the server sees is the
// same either way (the kernel keeps a cpuset's processes' masks inside
// it, and both the Go runtime's GOMAXPROCS and cpusched's contention
// guard read the mask), while masks need no root, no cpuset controller
// (cgroup v2 does not always enable it) and no cgroup for bench itself,
// which on cgroup v2 would take it out of its own for every controller.
// What a cgroup adds and masks lack: a process cannot widen it. Neither
// the runtime nor cpusched widens its mask (cpusched's pins stay inside
// the mask it read, pin.go), and the check after the start would see a
// shell or wrapper that did.

package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// The shapes, the parts of ReportShape.Name.
const (
	// ShapeMachine is the default: the servers, the floor's hog, bench's
	// load generator and the neighbour share every CPU.
	ShapeMachine     = "machine"
	ShapeCPUSet      = "cpuset"       // Config.CPUSet
	ShapeServerProcs = "server-procs" // Config.ServerProcs
	ShapeCPUQuota    = "cpu-quota"    // Config.CPUQuota
	ShapeCgroups     = "cgroups"      // Config.Cgroups
)

// ReportShape is the shape of machine a report's servers ran in.
type ReportShape struct {
	// Name is ShapeMachine, or the run's shapes joined by "+" in the
	// order cpuset, server-procs, cpu-quota, cgroups: "cpuset",
	// "server-procs+cgroups".
	Name string `json:"name"`
	// ServerCPUs are the CPUs of the servers and the floor's hog, and
	// OtherCPUs those of bench (the load generator) and the neighbour,
	// with CPUSet, in Cpus_allowed_list's format ("0", "2-3").
	ServerCPUs string `json:"server_cpus,omitempty"`
	OtherCPUs  string `json:"other_cpus,omitempty"`
	// ServerProcs is the GOMAXPROCS given to the servers and the floor's
	// hog (Config.ServerProcs); 0: the runtime's default.
	ServerProcs int `json:"server_procs,omitempty"`
}

// shapeName returns ReportShape.Name for c.
func shapeName(c Config) string {
	var parts []string
	for _, p := range []struct {
		on   bool
		name string
	}{{c.CPUSet, ShapeCPUSet}, {c.ServerProcs > 0, ShapeServerProcs}, {c.CPUQuota > 0, ShapeCPUQuota}, {c.Cgroups, ShapeCgroups}} {
		if p.on {
			parts = append(parts, p.name)
		}
	}
	if len(parts) == 0 {
		return ShapeMachine
	}
	return strings.Join(parts, "+")
}

// allowedCPUs returns the CPUs in the calling thread's affinity mask, in
// order (threadCPUs); tests replace it to split other machines.
var allowedCPUs = threadCPUs

// CPUSetHalves returns the CPUs of Config.CPUSet: the first half (rounded
// down) of those this thread may use, for the servers and the floor's
// hog, and the rest, for bench (the load generator) and the neighbour. On
// a 2-CPU machine, CPU 0 and CPU 1. Its error says why there are none:
// not Linux, or fewer than 2 CPUs.
func CPUSetHalves() (server, others []int, err error) {
	cpus, err := allowedCPUs()
	if err != nil {
		return nil, nil, err
	}
	if len(cpus) < 2 {
		return nil, nil, fmt.Errorf("needs at least 2 CPUs to split, this process may use %d (CPU %s)", len(cpus), FormatCPUs(cpus))
	}
	n := len(cpus) / 2
	return cpus[:n:n], cpus[n:], nil
}

// serverCPUCount returns how many CPUs the servers may use: every CPU, or
// with CPUSet their half (0 where there is none).
func (c Config) serverCPUCount() int {
	if !c.CPUSet {
		return runtime.NumCPU()
	}
	server, _, err := CPUSetHalves()
	if err != nil {
		return 0
	}
	return len(server)
}

// validateShape checks CPUSet and ServerProcs; the CPU quota's range
// depends on CPUSet too (Validate).
func (c Config) validateShape() error {
	if c.CPUSet {
		if _, _, err := CPUSetHalves(); err != nil {
			return fmt.Errorf("bench: CPUSet (-cpuset): %v", err)
		}
	}
	if n := c.serverCPUCount(); c.ServerProcs != 0 && (c.ServerProcs < 1 || c.ServerProcs > n) {
		return fmt.Errorf("bench: ServerProcs (-server-procs) must be 0 (the runtime's default) or in 1..%d%s, got %d", n, underCPUSet(c), c.ServerProcs)
	}
	return nil
}

// underCPUSet returns " (the servers' CPUs under -cpuset)" with CPUSet,
// for the ranges that depend on it.
func underCPUSet(c Config) string {
	if c.CPUSet {
		return " (the servers' CPUs under -cpuset)"
	}
	return ""
}

// shape is where a run's processes run.
type shape struct {
	// serverCPUs are the CPUs of the servers and the floor's hog, and
	// otherCPUs those of bench and the neighbour; nil without CPUSet.
	serverCPUs, otherCPUs []int
	serverProcs           int // GOMAXPROCS of the servers and the floor's hog; 0: the default
}

// newShape returns the shape of cfg's run.
func newShape(cfg Config) (shape, error) {
	s := shape{serverProcs: cfg.ServerProcs}
	if cfg.CPUSet {
		var err error
		if s.serverCPUs, s.otherCPUs, err = CPUSetHalves(); err != nil {
			return s, fmt.Errorf("CPUSet (-cpuset): %w", err)
		}
	}
	return s, nil
}

// report returns s as the report records it, named after cfg.
func (s shape) report(cfg Config) ReportShape {
	return ReportShape{Name: shapeName(cfg), ServerCPUs: FormatCPUs(s.serverCPUs), OtherCPUs: FormatCPUs(s.otherCPUs), ServerProcs: s.serverProcs}
}

// childRole is what a child process is to the run: it decides where the
// child runs.
type childRole int

const (
	serverRole   childRole = iota // a server, or the floor's hog beside it
	neighborRole                  // the neighbour
)

// place returns where a child of role runs in s, in cgroup cg (nil:
// bench's).
func (s shape) place(role childRole, cg *cpuCgroup) childPlace {
	p := childPlace{cgroup: cg}
	switch role {
	case serverRole:
		p.cpus = s.serverCPUs
		if s.serverProcs > 0 {
			p.env = []string{"GOMAXPROCS=" + strconv.Itoa(s.serverProcs)}
		}
	case neighborRole:
		p.cpus = s.otherCPUs
	}
	return p
}

// childPlace is where a child process runs: in a cgroup (nil: bench's),
// on CPUs (nil: bench's), with variables added to bench's environment.
type childPlace struct {
	cgroup *cpuCgroup
	cpus   []int
	env    []string
}

// command returns the command that runs name with args in p's cgroup and
// environment; start it with p.start, which gives it p's CPUs.
func (p childPlace) command(name string, args []string) *exec.Cmd {
	if p.cgroup != nil {
		name, args = p.cgroup.inCgroup(name, args)
	}
	cmd := exec.Command(name, args...)
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...) // the last of a name wins
	}
	return cmd
}

// start calls fn, which starts a child process, so that the child runs on
// p's CPUs from its first instruction (startOnCPUs).
func (p childPlace) start(fn func() error) error { return startOnCPUs(p.cpus, fn) }

// check returns an error naming both lists unless process pid (what it
// is, for the message) may run on p's CPUs and no others.
func (p childPlace) check(pid int, what string) error {
	if p.cpus == nil {
		return nil
	}
	got, err := processCPUs(pid)
	if err != nil {
		return fmt.Errorf("%s (pid %d): %w", what, pid, err)
	}
	if !slices.Equal(got, p.cpus) {
		return fmt.Errorf("%s (pid %d) may run on CPU %s, want CPU %s only (-cpuset)", what, pid, FormatCPUs(got), FormatCPUs(p.cpus))
	}
	return nil
}

// FormatCPUs writes a sorted CPU list as Cpus_allowed_list does: "0-1,4";
// "" for none.
func FormatCPUs(cpus []int) string {
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// parseCPUs parses a Cpus_allowed_list ("0-1,4") into its CPUs, in order.
func parseCPUs(list string) ([]int, error) {
	var cpus []int
	for item := range strings.SplitSeq(strings.TrimSpace(list), ",") {
		lo, hi, isRange := strings.Cut(item, "-")
		first, err := strconv.Atoi(lo)
		last := first
		if err == nil && isRange {
			last, err = strconv.Atoi(hi)
		}
		if err != nil || first < 0 || last < first {
			return nil, fmt.Errorf("malformed CPU list %q", list)
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// shapeLine describes the run's shape for the table's header.
func (r *Report) shapeLine() string {
	c, s := r.Config, r.Config.Shape
	if s.Name == "" || s.Name == ShapeMachine {
		return ShapeMachine + ": the servers, the floor's hog, bench (the load generator) and the neighbour share every CPU (-cpuset, -server-procs, -cpu-quota: other shapes)"
	}
	var parts []string
	if s.ServerCPUs != "" {
		parts = append(parts, fmt.Sprintf("the servers and the floor's hog on CPU %s, bench (the load generator) and the neighbour on CPU %s (sched_setaffinity, -cpuset)", s.ServerCPUs, s.OtherCPUs))
	}
	if s.ServerProcs > 0 {
		parts = append(parts, fmt.Sprintf("the servers and the floor's hog at GOMAXPROCS=%d of %d CPUs, a neighbour of %s (-server-procs; the servers' banners say what each mode made of it)", s.ServerProcs, r.Machine.CPUs, plural(int64(c.NeighborConcurrency), "thread")))
	}
	if c.CPUQuota > 0 {
		parts = append(parts, "every server and the floor's hog under a CPU quota (quota: below)")
	}
	if c.Cgroups {
		parts = append(parts, "the server and the neighbour in cgroups of their own (cgroups: below)")
	}
	return s.Name + ": " + strings.Join(parts, "; ")
}

// contentionCauses returns a mode's line of its scheduler's turns to
// contended (Result.Contentions) in the steps where no neighbour shared
// the server's CPUs (every step but the neighbor ones on the whole machine, every
// step in the other shapes), each with the guard's rule and the reading
// that decided it; "" where there were none.
func (r *Report) contentionCauses(mode string) string {
	shared := r.Config.Shape.Name == "" || r.Config.Shape.Name == ShapeMachine
	var parts []string
	for _, row := range r.Results {
		if row.Mode != mode || len(row.Contentions) == 0 || shared && (row.Step == StepNeighbor || row.Step == StepNeighborNoCkpt) {
			continue
		}
		var turns []string
		for _, c := range row.Contentions {
			turn := fmt.Sprintf("%q at %+.1f s, the others on %s of %s CPUs", c.Rule, c.AtS, report.Ms(c.OthersCPUs), report.Num(c.CPUs))
			if c.StarvedWindows > 0 {
				turn += fmt.Sprintf(", a thread starved %d windows", c.StarvedWindows)
			}
			turns = append(turns, turn)
		}
		parts = append(parts, row.Step+": "+strings.Join(turns, "; "))
	}
	if len(parts) == 0 {
		return ""
	}
	return "turned contended with no neighbour on its CPUs (the guard's rule, when from the window's start, its reading): " + strings.Join(parts, "; ")
}

// contendedFindings returns a mode's line of the share of each step its
// scheduler was contended (Result.ContendedPct), in a shape other than
// the whole machine, where the neighbour is not meant to contend with the
// server's CPUs; "" where no row has it.
func (r *Report) contendedFindings(mode string) string {
	if r.Config.Shape.Name == "" || r.Config.Shape.Name == ShapeMachine {
		return ""
	}
	var parts []string
	for _, row := range r.Results {
		if row.Mode == mode && row.ContendedPct != nil {
			parts = append(parts, row.Step+" "+report.Pct(*row.ContendedPct))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "contended (task threads kept at normal priority, others busy on their CPUs) for " + strings.Join(parts, ", ") + " of the step"
}
