package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// GCStopNote is the report config's explanation of gc_stop_max_ms.
const GCStopNote = "gc_stop_max_ms is cumulative per mode: the longest stop-the-world GC pause " +
	"(/sched/pauses/total/gc:seconds, bucket upper bound) since that mode's server started"

// Report is the outcome of Run: the table, the JSON and the plot are all
// written from it.
type Report struct {
	Machine Machine      `json:"machine"`
	Config  ReportConfig `json:"config"`
	Results []Result     `json:"results"`

	// Servers holds each mode's server banner, "none: isolation=none
	// workers=2 gomaxprocs=2", for the table's header.
	Servers []string `json:"-"`
}

// ReportConfig is the configuration a report was measured with.
type ReportConfig struct {
	StepS          float64  `json:"step_s"`
	ProbeRate      float64  `json:"probe_rate"`
	HogConcurrency int      `json:"hog_concurrency"`
	SmallRate      float64  `json:"small_rate"`
	GC             bool     `json:"gc"`
	Quick          bool     `json:"quick"`
	Modes          []string `json:"modes"`
	GCStopNote     string   `json:"gc_stop_max_note"`
	Workers        int      `json:"workers,omitempty"`  // -workers given to every server; 0: each mode's own
	SliceMs        float64  `json:"slice_ms,omitempty"` // -slice given to every server; 0: each mode's own
	// CPUQuota is each server's cgroup CPU limit in CPUs (-cpu-quota); 0:
	// none. Cgroup says where the cgroups were made, e.g.
	// "cgroup v1 /sys/fs/cgroup/cpu".
	CPUQuota float64 `json:"cpu_quota,omitempty"`
	Cgroup   string  `json:"cgroup,omitempty"`

	Warmup time.Duration `json:"-"` // unmeasured lead-in of every step
}

func reportConfig(c Config) ReportConfig {
	return ReportConfig{
		StepS:          c.Step.Seconds(),
		ProbeRate:      c.ProbeRate,
		HogConcurrency: c.HogConcurrency,
		SmallRate:      c.SmallRate,
		GC:             c.GC,
		Quick:          c.Quick,
		Modes:          c.modes(),
		GCStopNote:     GCStopNote,
		Workers:        c.Workers,
		SliceMs:        float64(c.Slice) / 1e6,
		CPUQuota:       c.CPUQuota,
		Warmup:         c.Warmup,
	}
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
	// same rate in the same step: the floor for Small.
	SmallDirect *SmallResult `json:"small_direct"`
	// CPUBusyPct is the whole machine's busy time over the measured window
	// (100 = every CPU busy; it includes the load generator and anything
	// else running); nil where /proc/stat cannot be read.
	CPUBusyPct *float64 `json:"cpu_busy_pct"`
	// GCStopMaxMs: see GCStopNote.
	GCStopMaxMs *float64 `json:"gc_stop_max_ms"`
	// CgroupCPU is the server cgroup's throttling over the measured window;
	// absent without a CPU quota.
	CgroupCPU *CgroupCPUStat `json:"cgroup_cpu_stat,omitempty"`
	// Attribution is the file with the slow probe requests' causes, with
	// Config.TraceDir (hog-sched only).
	Attribution string `json:"attribution,omitempty"`
}

// ProbeResult is the 1 ms probe's outcome: achieved rate, latency from each
// request's due time, and failed or non-2xx requests.
type ProbeResult struct {
	RPS    float64 `json:"rps"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
	Errors int64   `json:"errors"`
}

// HogResult is the CPU-heavy load's throughput, in CRC32 passes per second
// and as a percentage of the same mode's hog-direct step (nil if that step
// was not measured).
type HogResult struct {
	PassesPerS  float64  `json:"passes_per_s"`
	PctOfDirect *float64 `json:"pct_of_direct"`
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

// fillPctOfDirect sets every hog row's PctOfDirect from its mode's
// hog-direct row.
func (r *Report) fillPctOfDirect() {
	direct := map[string]float64{}
	for _, row := range r.Results {
		if row.Step == StepHogDirect && row.Hog != nil {
			direct[row.Mode] = row.Hog.PassesPerS
		}
	}
	for i := range r.Results {
		h := r.Results[i].Hog
		if h == nil {
			continue
		}
		if d := direct[r.Results[i].Mode]; d > 0 {
			pct := h.PassesPerS / d * 100
			h.PctOfDirect = &pct
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
// a line per mode comparing the probe's tail across steps. Absent loads are
// "-". It returns the first write error.
func (r *Report) WriteTable(w io.Writer) error {
	ew := report.NewErrWriter(w)
	c := r.Config
	ew.Printf("machine: %s\n", r.MachineLine())
	gc := "off"
	if c.GC {
		gc = "on (-gc: garbage per probe request)"
	}
	quick := ""
	if c.Quick {
		quick = " (-quick)"
	}
	ew.Printf("config:  steps of %v after %v warm-up%s; probe %s open loop %g/s; hog %s c=%d; small /checksum?n=10&sched=1 and sched=0 open loop %g/s each; server garbage %s\n",
		seconds(c.StepS), c.Warmup, quick, pathProbe, c.ProbeRate, "/checksum?sched=0|1", c.HogConcurrency, c.SmallRate, gc)
	if c.CPUQuota > 0 {
		ew.Printf("quota:   every server in its own cgroup limited to %g CPUs (%d us per %d us period; %s); the load generator outside\n",
			c.CPUQuota, quotaUs(c.CPUQuota), cfsPeriodUs, c.Cgroup)
	}
	if len(r.Servers) > 0 {
		ew.Printf("servers: %s\n", strings.Join(r.Servers, "; "))
	}
	ew.Printf("latencies in ms from each request's due time; small: scheduled, direct (sched=0, the floor), and the scheduler's own wait (Task.Waited); gc stw max in ms, cumulative per mode\n\n")
	if ew.Err() != nil {
		return ew.Err()
	}

	t := report.NewTable("mode", "step", "p50", "p99", "p99.9", "max", "probe/s",
		"hog passes/s", "% of direct", "small p50", "small p99", "direct p99", "waited p99", "cpu busy", "gc stw max")
	var probeErrors int64
	for _, row := range r.Results {
		cells := []string{row.Mode, row.Step}
		if p := row.Probe; p != nil {
			cells = append(cells, report.Ms(p.P50Ms), report.Ms(p.P99Ms), report.Ms(p.P999Ms), report.Ms(p.MaxMs), report.Num(math.Round(p.RPS)))
			probeErrors += p.Errors
		} else {
			cells = append(cells, "-", "-", "-", "-", "-")
		}
		if h := row.Hog; h != nil {
			cells = append(cells, report.Num(math.Round(h.PassesPerS)), pctOrDash(h.PctOfDirect))
		} else {
			cells = append(cells, "-", "-")
		}
		if s := row.Small; s != nil {
			cells = append(cells, report.Ms(s.P50Ms), report.Ms(s.P99Ms))
		} else {
			cells = append(cells, "-", "-")
		}
		if s := row.SmallDirect; s != nil {
			cells = append(cells, report.Ms(s.P99Ms))
		} else {
			cells = append(cells, "-")
		}
		if s := row.Small; s != nil {
			cells = append(cells, msOrDash(s.WaitedP99Ms))
		} else {
			cells = append(cells, "-")
		}
		cells = append(cells, pctOrDash(row.CPUBusyPct), msOrDash(row.GCStopMaxMs))
		t.Row(cells...)
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
	if lines := r.throttling(); len(lines) > 0 {
		ew.Printf("\ncgroup throttling per measured window (cpu.stat: throttled periods/periods, throttled time summed over CPUs; the server's CPU use):\n%s", strings.Join(lines, ""))
	}
	return ew.Err()
}

// throttling returns one line per mode with rows that have cgroup
// accounting: each step's throttled periods and time.
func (r *Report) throttling() []string {
	var lines []string
	for _, mode := range r.Config.Modes {
		var parts []string
		for _, step := range Steps() {
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

// findings returns one line per mode that has an idle and a hog-direct row:
// the probe's p99 idle, under the direct CPU load, and under the same load
// through cpusched with its throughput.
func (r *Report) findings() []string {
	var lines []string
	for _, mode := range r.Config.Modes {
		idle, direct := r.find(mode, StepIdle), r.find(mode, StepHogDirect)
		if idle == nil || direct == nil || idle.Probe == nil || direct.Probe == nil {
			continue
		}
		s := fmt.Sprintf("%s: probe p99 %s ms idle, %s ms under the direct CPU load (%s idle)",
			mode, report.Ms(idle.Probe.P99Ms), report.Ms(direct.Probe.P99Ms), times(direct.Probe.P99Ms, idle.Probe.P99Ms))
		if sched := r.find(mode, StepHogSched); sched != nil && sched.Probe != nil {
			s += fmt.Sprintf(", %s ms with that load through cpusched (%s hog-direct)",
				report.Ms(sched.Probe.P99Ms), times(sched.Probe.P99Ms, direct.Probe.P99Ms))
			if sched.Hog != nil && sched.Hog.PctOfDirect != nil {
				s += fmt.Sprintf(" at %s of its throughput", report.Pct(*sched.Hog.PctOfDirect))
			}
		}
		lines = append(lines, s+"\n")
		if sm := r.find(mode, StepHogSchedSm); sm != nil && sm.Small != nil && sm.SmallDirect != nil {
			s := fmt.Sprintf("%s: small requests p99 %s ms through cpusched, %s ms run directly at the same rate (%s direct)",
				mode, report.Ms(sm.Small.P99Ms), report.Ms(sm.SmallDirect.P99Ms), times(sm.Small.P99Ms, sm.SmallDirect.P99Ms))
			if w := sm.Small.WaitedP99Ms; w != nil {
				s += fmt.Sprintf("; the scheduler's own wait p99 %s ms", report.Ms(*w))
			}
			lines = append(lines, s+"\n")
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
// grouped bars per mode and step on a log scale, to path (.png, .svg, ...).
// It fails, writing nothing, if the report has no probe results.
func (r *Report) WritePlot(path string) error {
	var cats []string
	series := []report.Bars{{Name: "p50"}, {Name: "p99"}, {Name: "p99.9"}, {Name: "max"}}
	for _, row := range r.Results {
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
	title := fmt.Sprintf("cpusched bench: %s latency (%d CPUs, %s)", pathProbe, m.CPUs, m.Go)
	if m.CPU != "" {
		title = fmt.Sprintf("cpusched bench: %s latency (%d CPUs, %s, %s)", pathProbe, m.CPUs, m.CPU, m.Go)
	}
	return report.BarPlot(path, title, "probe latency (ms)", true, cats, series)
}
