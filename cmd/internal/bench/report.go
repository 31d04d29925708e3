package bench

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/demo"
	"github.com/cpusched/cpusched/cmd/internal/report"
)

// Report is the outcome of Run: the table, the JSON and the plot are all
// written from it.
type Report struct {
	Machine Machine      `json:"machine"`
	Config  ReportConfig `json:"config"`
	Results []Result     `json:"results"`
	// Skipped are the modes asked for that could not be measured here (the
	// floor where SCHED_IDLE cannot be set), with why.
	Skipped []Skipped `json:"skipped,omitempty"`

	// Servers holds each mode's server banner, "none: isolation=none
	// workers=2 gomaxprocs=2", for the table's header.
	Servers []string `json:"-"`
}

// ReportConfig is the configuration a report was measured with.
type ReportConfig struct {
	StepS          float64 `json:"step_s"`
	ProbeRate      float64 `json:"probe_rate"`
	HogConcurrency int     `json:"hog_concurrency"`
	SmallRate      float64 `json:"small_rate"`
	IOConcurrency  int     `json:"io_concurrency"` // io-heavy's closed-loop connections
	IOPath         string  `json:"io_path"`        // the route they drive
	// Garbage names the servers' garbage: "clean" (-clean: none),
	// "default", "gc" (-gc) or "custom"; GarbageBytes is the response
	// buffer of every fast request (-garbage), and the CRC32 work
	// allocates TaskGarbageBytes every 64 passes.
	Garbage          string   `json:"garbage"`
	GarbageBytes     int      `json:"garbage_bytes"`
	TaskGarbageBytes int      `json:"task_garbage_bytes"`
	Quick            bool     `json:"quick"`
	Modes            []string `json:"modes"`
	Steps            []string `json:"steps,omitempty"` // -steps; absent: every step
	// NeighborConcurrency is the neighbour's threads (-neighbor-c), and
	// Cgroups whether it and the server each ran in a cgroup of its own
	// (-cgroups).
	NeighborConcurrency int     `json:"neighbor_concurrency"`
	Cgroups             bool    `json:"cgroups,omitempty"`
	GCNote              string  `json:"gc_note"`
	Workers             int     `json:"workers,omitempty"`  // -workers given to every server; 0: each mode's own
	SliceMs             float64 `json:"slice_ms,omitempty"` // -slice given to every server; 0: each mode's own
	// CPUQuota is each server's cgroup CPU limit in CPUs (-cpu-quota); 0:
	// none. Cgroup says where the cgroups were made (with CPUQuota or
	// Cgroups), e.g. "cgroup v1 /sys/fs/cgroup/cpu".
	CPUQuota float64 `json:"cpu_quota,omitempty"`
	Cgroup   string  `json:"cgroup,omitempty"`
	// Shape is the shape of machine the servers ran in (shape.go).
	Shape ReportShape `json:"shape"`
	// Tenants is the tenants step's groups and work, where it was
	// measured.
	Tenants *ReportTenants `json:"tenants,omitempty"`
	// Server says how the servers, the floor's hog and the neighbour ran:
	// "unprivileged (uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0)", as a
	// container runs a service (the default as root), "privileged (root)"
	// (-privileged), or unprivileged as the bench itself when it is not
	// root; Privileged is whether as root, and ServerNote says why, for
	// the table's header.
	Server     string `json:"server"`
	Privileged bool   `json:"privileged"`
	ServerNote string `json:"-"`

	Warmup time.Duration `json:"-"` // unmeasured lead-in of every step
}

func reportConfig(c Config) ReportConfig {
	rc := ReportConfig{
		StepS:          c.Step.Seconds(),
		ProbeRate:      c.ProbeRate,
		HogConcurrency: c.HogConcurrency,
		SmallRate:      c.SmallRate,
		IOConcurrency:  c.IOConcurrency,
		IOPath:         pathIO,
		Garbage:        garbageName(c.Garbage),
		GarbageBytes:   c.Garbage,
		Quick:          c.Quick,
		Modes:          c.modes(),
		Steps:          c.Steps,
		GCNote:         GCNote,
		Workers:        c.Workers,
		SliceMs:        float64(c.Slice) / 1e6,
		CPUQuota:       c.CPUQuota,
		Shape:          ReportShape{Name: shapeName(c), ServerProcs: c.ServerProcs},
		Warmup:         c.Warmup,

		NeighborConcurrency: c.NeighborConcurrency,
		Cgroups:             c.Cgroups,
	}
	if c.Garbage > 0 {
		rc.TaskGarbageBytes = demo.TaskGarbage
	}
	return rc
}

// garbageName names a Config.Garbage for the report.
func garbageName(bytes int) string {
	switch bytes {
	case 0:
		return "clean"
	case demo.DefaultGarbage:
		return "default"
	case demo.HeavyGarbage:
		return "gc"
	}
	return "custom"
}

// Result is one row: one step of one mode. A nil Hog or Small means the
// step had no such load (JSON null).
type Result struct {
	Mode  string       `json:"mode"`
	Step  string       `json:"step"`
	Probe *ProbeResult `json:"probe"`
	Hog   *HogResult   `json:"hog"`
	Small *SmallResult `json:"small"`
	// SmallDirect is the same small requests run directly (sched=0) at the
	// same rate in the same step: the reference for Small.
	SmallDirect *SmallResult `json:"small_direct"`
	// CPUBusyPct is the whole machine's busy time over the measured window
	// (100 = every CPU busy; it includes the load generator and anything
	// else running); nil where /proc/stat cannot be read.
	CPUBusyPct *float64 `json:"cpu_busy_pct"`
	// GC is the server's GC pauses over the measured window (GCNote).
	GC *GCPauses `json:"gc"`
	// Neighbor is the neighbour's throughput, in the steps beside it.
	Neighbor *NeighborResult `json:"neighbor"`
	// Lends is how many times the server's ospriority scheduler lent a
	// slot to the rest of the program during the step (Stats.Lends), and
	// LentSlots the slots it lent on average over the step
	// (Stats.LentTime); nil in the other modes.
	Lends     *uint64  `json:"lends,omitempty"`
	LentSlots *float64 `json:"lent_slots,omitempty"`
	// ContendedPct is the share of the step the ospriority scheduler ran
	// its task threads at normal priority because other processes kept
	// the CPUs busy (Stats.ContendedTime); nil in the other modes.
	ContendedPct *float64 `json:"contended_pct,omitempty"`
	// Contentions are the server's turns to contended that its log gave
	// from the end of the step before (or the server's start) to the end
	// of this step's window, with the rule and reading that decided each.
	Contentions []ContentionSwitch `json:"contentions,omitempty"`
	// ThreadsRaisable is whether the ospriority server's scheduler can
	// raise a lowered thread back (Stats.ThreadsRaisable: false without
	// CAP_SYS_NICE and with RLIMIT_NICE 0, ReportConfig.Server);
	// RetiredThreads how many lowered threads it ended instead during the
	// step (Stats.RetiredThreads), and LooseThreads how many went back to
	// the runtime's pool lowered (Stats.LooseThreads); nil in the other
	// modes.
	ThreadsRaisable *bool   `json:"threads_raisable,omitempty"`
	RetiredThreads  *uint64 `json:"retired_threads,omitempty"`
	LooseThreads    *uint64 `json:"loose_threads,omitempty"`
	// CgroupCPU is the server cgroup's throttling over the measured window;
	// absent without a CPU quota.
	CgroupCPU *CgroupCPUStat `json:"cgroup_cpu_stat,omitempty"`
	// Attribution is the file with the slow requests' causes, with
	// Config.TraceDir (the steps tracedStep names).
	Attribution string `json:"attribution,omitempty"`
	// Tenants is the tenants step's groups' figures; absent in the other
	// steps.
	Tenants *TenantsResult `json:"tenants,omitempty"`
	// Auto is what httpsched.Auto made of the auto step's CPU-heavy
	// route; absent in the other steps.
	Auto *AutoResult `json:"auto,omitempty"`
	// VsFloor compares the row with the floor's step it compares with in
	// the same run; nil for the floor's own rows, steps with no floor
	// counterpart (hog-direct, hog-sched+small) and runs without the floor.
	VsFloor *VsFloor `json:"vs_floor"`
}

// ProbeResult is the probe's outcome: achieved rate, latency, and failed or
// non-2xx requests. The probe is the 1 ms endpoint open loop, latency from
// each request's due time; in io-heavy it is the closed loop on pathIO
// (ClosedLoop), latency from each request's send, whose rate is the
// throughput the server gave it.
type ProbeResult struct {
	RPS    float64 `json:"rps"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
	// ClosedLoop and Connections mark io-heavy's closed loop; they are
	// left out of the small requests' results, which are open loop.
	ClosedLoop  bool `json:"closed_loop,omitempty"`
	Connections int  `json:"connections,omitempty"`
}

// HogResult is the CPU-heavy load's throughput, in CRC32 passes per second
// and as a percentage of the hog-direct row DirectRef names: the same
// mode's, and for the floor's hog that of directRef (nil if no such row
// was measured); and as a percentage of the floor's hog in the step the
// row compares with (VsFloor.Step), nil where there is none.
type HogResult struct {
	PassesPerS  float64  `json:"passes_per_s"`
	PctOfDirect *float64 `json:"pct_of_direct"`
	DirectRef   string   `json:"direct_ref,omitempty"` // "MODE/hog-direct"
	PctOfFloor  *float64 `json:"pct_of_floor"`
	// FloorHog: the passes are the floor's hog process's, not the server's.
	FloorHog bool `json:"floor_hog,omitempty"`
}

// SmallResult is the small requests' outcome: achieved rate, latency from
// each request's due time, failed or non-2xx requests, and for the
// scheduled ones the scheduler's own queueing delay (Task.Waited).
type SmallResult struct {
	ProbeResult // the same fields as the probe's, at the same JSON level

	WaitedP50Ms *float64 `json:"waited_p50_ms,omitempty"`
	WaitedP99Ms *float64 `json:"waited_p99_ms,omitempty"`
	WaitedMaxMs *float64 `json:"waited_max_ms,omitempty"`
}

// fillPctOfDirect sets every hog row's PctOfDirect and DirectRef from its
// mode's hog-direct row, or the floor's from directRef's.
func (r *Report) fillPctOfDirect() {
	direct := map[string]*Result{}
	for i, row := range r.Results {
		if row.Step == StepHogDirect && row.Hog != nil {
			direct[row.Mode] = &r.Results[i]
		}
	}
	if ref := r.directRef(); ref != nil {
		direct[ModeFloor] = ref
	}
	for i := range r.Results {
		h := r.Results[i].Hog
		if h == nil {
			continue
		}
		h.PctOfDirect, h.DirectRef = nil, ""
		if d := direct[r.Results[i].Mode]; d != nil && d.Hog.PassesPerS > 0 {
			pct := h.PassesPerS / d.Hog.PassesPerS * 100
			h.PctOfDirect, h.DirectRef = &pct, d.Mode+"/"+d.Step
		}
	}
}

// find returns the row of mode and step, or nil.
func (r *Report) find(mode, step string) *Result {
	for i := range r.Results {
		if r.Results[i].Mode == mode && r.Results[i].Step == step {
			return &r.Results[i]
		}
	}
	return nil
}

// WriteJSON writes r as indented JSON and returns the first write error.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// MachineLine describes the machine in one line.
func (r *Report) MachineLine() string {
	m := r.Machine
	cpu := m.CPU
	if cpu == "" {
		cpu = "unknown CPU"
	}
	s := fmt.Sprintf("%s, %d CPUs, GOMAXPROCS %d, %s, %s", cpu, m.CPUs, m.GOMAXPROCS, m.Go, m.OS)
	if m.Kernel != "" {
		s += " " + m.Kernel
	}
	return s
}

// WriteTable writes the header lines, one table row per mode and step, and
// the summary lines (findings). Absent loads are "-". It returns the first
// write error.
func (r *Report) WriteTable(w io.Writer) error {
	ew := report.NewErrWriter(w)
	r.writeHeader(ew)
	if ew.Err() != nil {
		return ew.Err()
	}
	t := report.NewTable("mode", "step", "p50", "p99", "p99.9", "max", "probe/s", "p99 x floor",
		"hog passes/s", "% of direct", "% of floor", "small p99", "direct p99", "waited p99", "nbr passes/s",
		"cpu busy", "gc p99", "gc max", "stop max", "lent", "contended", "retired")
	var probeErrors int64
	for _, row := range r.Results {
		t.Row(tableRow(row)...)
		if row.Probe != nil {
			probeErrors += row.Probe.Errors
		}
	}
	if err := t.Write(w); err != nil {
		return err
	}
	if probeErrors > 0 {
		ew.Printf("\nprobe errors (failed or non-2xx responses): %d in all; see the JSON for each step\n", probeErrors)
	}
	if lines := r.findings(); len(lines) > 0 {
		ew.Printf("\n%s", strings.Join(lines, ""))
	}
	if err := r.writeTenants(ew); err != nil {
		return err
	}
	if lines := r.throttling(); len(lines) > 0 {
		ew.Printf("\ncgroup throttling per measured window (cpu.stat: throttled periods/periods, throttled time summed over CPUs; the server's CPU use):\n%s", strings.Join(lines, ""))
	}
	return ew.Err()
}

// writeHeader writes the lines above the table: the machine, the
// configuration, the servers and how to read the figures.
func (r *Report) writeHeader(ew *report.ErrWriter) {
	c := r.Config
	ew.Printf("machine: %s\n", r.MachineLine())
	quick := ""
	if c.Quick {
		quick = " (-quick)"
	}
	steps := ""
	if len(c.Steps) > 0 {
		steps = " (-steps " + strings.Join(c.Steps, ",") + ")"
	}
	ew.Printf("config:  steps of %v after %v warm-up%s%s; probe %s open loop %g/s; hog %s c=%d; small /checksumSmallTaskWithCpuWorker?sched=1 and sched=0 open loop %g/s each; io-heavy %s closed loop c=%d; neighbour %d threads\n",
		seconds(c.StepS), c.Warmup, quick, steps, pathProbe, c.ProbeRate, "/checksum?sched=0|1", c.HogConcurrency, c.SmallRate, c.IOPath, c.IOConcurrency, c.NeighborConcurrency)
	ew.Printf("garbage: %s\n", garbageLine(c))
	ew.Printf("shape:   %s\n", r.shapeLine())
	if c.Cgroups {
		ew.Printf("cgroups: the server (with the floor's hog) and the neighbour each in a cgroup of its own, equal weights (-cgroups; %s); the load generator outside\n", c.Cgroup)
	}
	if c.CPUQuota > 0 {
		ew.Printf("quota:   every server in its own cgroup limited to %g CPUs (%d us per %d us period; %s), the floor's hog in its server's, and so is the neighbour unless -cgroups gives it its own; the load generator outside\n",
			c.CPUQuota, quotaUs(c.CPUQuota), cfsPeriodUs, c.Cgroup)
	}
	if c.Server != "" {
		ew.Printf("server:  %s: %s\n", c.Server, c.ServerNote)
	}
	if len(r.Servers) > 0 {
		ew.Printf("servers: %s\n", strings.Join(r.Servers, "; "))
	}
	for _, s := range r.Skipped {
		ew.Printf("skipped: %s: %s\n", s.Mode, s.Reason)
	}
	ew.Printf("latencies in ms, open loop from each request's due time, closed loop (io-heavy) from its send; small: scheduled, direct (sched=0, their reference), and the scheduler's own wait (Task.Waited); nbr: the neighbour's own passes; gc p99, gc max: the server's GC pauses in the window, stop max: the longest time to stop the world in it, ms; lent: the slots ospriority lent to the rest of the server, on average over the step; retired: the lowered threads ospriority ended in the step, where it cannot raise them back (raisable=false)\n")
	if r.hasFloor() {
		others := "hog-nockpt, auto: its hog-sched"
		if slices.ContainsFunc(r.Results, func(row Result) bool { return row.Step == StepNeighborNoCkpt }) {
			others += "; neighbor-nockpt: its neighbor"
		}
		ew.Printf("%s: no task in the server, the same CPU work in a separate SCHED_IDLE process; p99 x floor and %% of floor: the p99 and the hog's passes/s over the floor's same step (%s)%s\n",
			ModeFloor, others, r.floorDirectNote())
	}
	ew.Printf("\n")
}

// hasFloor reports whether the report has rows of the floor.
func (r *Report) hasFloor() bool {
	return slices.ContainsFunc(r.Results, func(row Result) bool { return row.Mode == ModeFloor })
}

// garbageLine describes the servers' garbage.
func garbageLine(c ReportConfig) string {
	if c.GarbageBytes == 0 {
		return "none (-clean): the clean room, no garbage anywhere"
	}
	which := map[string]string{
		"default": fmt.Sprintf("the default; -clean: none, -gc: %s per request", kib(demo.HeavyGarbage)),
		"gc":      "-gc",
		"custom":  "Config.Garbage",
	}[c.Garbage]
	return fmt.Sprintf("every fast request builds a %s response buffer, and the CRC32 work allocates %s every %d passes (%s)",
		kib(c.GarbageBytes), kib(c.TaskGarbageBytes), demo.TaskGarbageEvery, which)
}

// kib formats bytes as "32 KiB", or "100 bytes" when not a whole KiB.
func kib(bytes int) string {
	if bytes%1024 != 0 {
		return fmt.Sprintf("%d bytes", bytes)
	}
	return fmt.Sprintf("%d KiB", bytes/1024)
}

// floorDirectNote says what the floor's % of direct is a share of.
func (r *Report) floorDirectNote() string {
	for _, row := range r.Results {
		if row.Mode == ModeFloor && row.Hog != nil && row.Hog.DirectRef != "" {
			return "; its % of direct is of " + row.Hog.DirectRef
		}
	}
	return ""
}

// tableRow returns the cells of row.
func tableRow(row Result) []string {
	cells := []string{row.Mode, row.Step}
	if p := row.Probe; p != nil {
		cells = append(cells, report.Ms(p.P50Ms), report.Ms(p.P99Ms), report.Ms(p.P999Ms), report.Ms(p.MaxMs), report.Num(math.Round(p.RPS)))
	} else {
		cells = append(cells, "-", "-", "-", "-", "-")
	}
	if v := row.VsFloor; v != nil {
		cells = append(cells, report.Ms(v.P99X))
	} else {
		cells = append(cells, "-")
	}
	if h := row.Hog; h != nil {
		cells = append(cells, report.Num(math.Round(h.PassesPerS)), pctOrDash(h.PctOfDirect), pctOrDash(h.PctOfFloor))
	} else {
		cells = append(cells, "-", "-", "-")
	}
	cells = append(cells, smallCell(row.Small), smallCell(row.SmallDirect))
	if s := row.Small; s != nil {
		cells = append(cells, msOrDash(s.WaitedP99Ms))
	} else {
		cells = append(cells, "-")
	}
	if n := row.Neighbor; n != nil {
		cells = append(cells, report.Num(math.Round(n.PassesPerS)))
	} else {
		cells = append(cells, "-")
	}
	cells = append(cells, pctOrDash(row.CPUBusyPct))
	if g := row.GC; g != nil {
		cells = append(cells, report.Ms(g.PauseP99Ms), report.Ms(g.PauseMaxMs), report.Ms(g.StoppingMaxMs))
	} else {
		cells = append(cells, "-", "-", "-")
	}
	if row.LentSlots != nil {
		cells = append(cells, report.Ms(*row.LentSlots))
	} else {
		cells = append(cells, "-")
	}
	cells = append(cells, pctOrDash(row.ContendedPct))
	if row.RetiredThreads != nil {
		return append(cells, report.Num(float64(*row.RetiredThreads)))
	}
	return append(cells, "-")
}

// smallCell is a small load's p99, or "-" for none.
func smallCell(s *SmallResult) string {
	if s == nil {
		return "-"
	}
	return report.Ms(s.P99Ms)
}

// throttling returns one line per mode with rows that have cgroup
// accounting: each step's throttled periods and time.
func (r *Report) throttling() []string {
	var lines []string
	for _, mode := range r.Config.Modes {
		var parts []string
		for _, step := range StepNames() { // the opt-in steps' rows too
			if row := r.find(mode, step); row != nil && row.CgroupCPU != nil {
				cs := row.CgroupCPU
				parts = append(parts, fmt.Sprintf("%s %d/%d %s ms (%.2f CPUs)", step, cs.Throttled, cs.Periods, report.Num(math.Round(cs.ThrottledMs)), cs.ServerCPUs))
			}
		}
		if len(parts) > 0 {
			lines = append(lines, mode+": "+strings.Join(parts, ", ")+"\n")
		}
	}
	return lines
}

// times compares a with b: "12.3x higher than", "4.56x lower than", or
// "the same as"; "?" if either is not positive.
func times(a, b float64) string {
	switch {
	case !(a > 0) || !(b > 0):
		return "?"
	case a >= b*1.05:
		return report.Ms(a/b) + "x higher than"
	case b >= a*1.05:
		return report.Ms(b/a) + "x lower than"
	}
	return "about the same as"
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

func pctOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Pct(*v)
}

func msOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Ms(*v)
}

// WritePlot draws the probe's latency percentiles (p50, p99, p99.9, max) as
// grouped bars per mode and step on a log scale, to path (.png, .svg, ...),
// step by step with the floor's row each step compares with first (see
// plotRows). It fails, writing nothing, if the report has no probe results.
func (r *Report) WritePlot(path string) error {
	var cats []string
	series := []report.Bars{{Name: "p50"}, {Name: "p99"}, {Name: "p99.9"}, {Name: "max"}}
	for _, row := range r.plotRows() {
		if row.Probe == nil {
			continue
		}
		cats = append(cats, row.Mode+"/"+row.Step)
		for i, v := range []float64{row.Probe.P50Ms, row.Probe.P99Ms, row.Probe.P999Ms, row.Probe.MaxMs} {
			series[i].Values = append(series[i].Values, v)
		}
	}
	if len(cats) == 0 {
		return fmt.Errorf("bench: no probe results to plot")
	}
	m := r.Machine
	cpu := ""
	if m.CPU != "" {
		cpu = ", " + m.CPU
	}
	title := fmt.Sprintf("cpusched bench: probe latency, each step beside the floor (%d CPUs%s, %s)", m.CPUs, cpu, m.Go)
	return report.BarPlot(path, title, "probe latency (ms; io-heavy: closed loop)", true, cats, series)
}

// plotRows returns the rows in the plot's order: step by step
// (StepNames), each step's group led by the floor's row it compares with
// (floorStepOf; the floor's hog-sched leads hog-nockpt's group too, and
// neighbor-alone, the floor's alone, is a group of its own), then the
// other modes' rows of that step in the run's order. A floor's row that
// leads another step's group (hog-sched for hog-nockpt) leads it only
// where that step has rows.
func (r *Report) plotRows() []Result {
	var rows []Result
	for _, step := range StepNames() {
		var others []Result
		for _, row := range r.Results {
			if row.Step == step && row.Mode != ModeFloor {
				others = append(others, row)
			}
		}
		ref := cmp.Or(floorStepOf(step), step)
		if f := r.find(ModeFloor, ref); f != nil && (ref == step || len(others) > 0) {
			rows = append(rows, *f)
		}
		rows = append(rows, others...)
	}
	return rows
}
