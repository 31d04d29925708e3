// The tenants step in the report: its work in the config, and a table of
// each mode's groups after the main table.

package bench

import (
	"fmt"
	"math"
	"strings"

	"github.com/cpusched/cpusched/cmd/internal/report"
)

// ReportTenants is the tenants step's groups and the work their tasks
// are made of, in passes, timed once in bench (the same in every mode).
type ReportTenants struct {
	Groups []Tenant `json:"groups"`
	// PassUs is one CRC32 pass's CPU time as bench timed it, us.
	PassUs float64 `json:"pass_us"`
	// TaskPasses and CallPasses are the least and the most passes of a
	// task that yields (a Checkpoint after each pass) and of a call that
	// cannot (none).
	TaskPasses [2]int `json:"task_passes"`
	CallPasses [2]int `json:"call_passes"`
	// PauseMs is the longest rest of a bursty group's client.
	PauseMs float64 `json:"pause_ms"`
}

// report returns the plan as the report's config records it.
func (plan *tenantPlan) report() *ReportTenants {
	return &ReportTenants{
		Groups: plan.tenants, PassUs: float64(plan.pass) / 1e3,
		TaskPasses: [2]int{plan.minTask, plan.maxTask}, CallPasses: [2]int{plan.minCall, plan.maxCall},
		PauseMs: float64(TenantPause) / 1e6,
	}
}

// tenantColumn is a column of the tenants table: its heading and its
// cell for one group over a window of windowS seconds.
type tenantColumn struct {
	heading string
	cell    func(g TenantGroup, windowS float64) string
}

// tenantColumns are the tenants table's per-group columns, after the
// mode's probe.
var tenantColumns = []tenantColumn{
	{"group", func(g TenantGroup, _ float64) string { return g.Name }},
	{"weight", func(g TenantGroup, _ float64) string { return report.Num(float64(g.Weight)) }},
	{"owed", func(g TenantGroup, _ float64) string { return report.Pct(g.WeightShare * 100) }},
	{"passes/s", func(g TenantGroup, _ float64) string { return numOrDash(g.PassesPerS) }},
	{"share", func(g TenantGroup, _ float64) string { return pctOf(g.Share) }},
	{"share/weight", func(g TenantGroup, _ float64) string { return ratioOrDash(g.ShareX) }},
	{"slot CPUs", func(g TenantGroup, w float64) string { return cpusOf(g.RunTimeMs, w) }},
	{"cpu CPUs", func(g TenantGroup, w float64) string { return cpusOf(g.CPUTimeMs, w) }},
	{"tasks", func(g TenantGroup, _ float64) string { return countOrDash(g.Tasks) }},
	{"errors", func(g TenantGroup, _ float64) string { return countOrDash(g.Errors) }},
}

// writeTenants writes the tenants step's lines and table, if it was
// measured: a line of the groups and their work, the floor's weighting
// (or why it has none), and a line per mode and group.
func (r *Report) writeTenants(ew *report.ErrWriter) error {
	rc := r.Config.Tenants
	if rc == nil {
		return nil
	}
	var groups []string
	for _, t := range rc.Groups {
		g := fmt.Sprintf("%s %d, %d clients", t.Name, t.Weight, t.Clients)
		if t.CallPct > 0 {
			g += fmt.Sprintf(", %d%% calls", t.CallPct)
		}
		if t.Bursty {
			g += ", bursty"
		}
		groups = append(groups, g)
	}
	ew.Printf("\ntenants: weights %s (%s); closed loop on /checksum?sched=1&group=NAME; a task that yields: %s-%s passes, a Checkpoint after each; a call that cannot: %s-%s passes in one go (a pass %s us here); bursty clients rest 0-%s ms between tasks; beside the probe\n",
		TenantWeights(rc.Groups), strings.Join(groups, "; "), report.Num(float64(rc.TaskPasses[0])), report.Num(float64(rc.TaskPasses[1])),
		report.Num(float64(rc.CallPasses[0])), report.Num(float64(rc.CallPasses[1])), report.Ms(rc.PassUs), report.Num(rc.PauseMs))
	ew.Printf("owed: the weight's share; share: of all the groups' passes in the window (the floor: of their processes' CPU time, all passes); share/weight: share over owed (1 as the weights say); slot CPUs: the group's slot time (GroupStats.RunTime) over the window; cpu CPUs: its CPU time over the window (the floor: its process's)\n")
	headings := []string{"mode", "probe p99", "p99 x floor"}
	for _, c := range tenantColumns {
		headings = append(headings, c.heading)
	}
	t := report.NewTable(headings...)
	rows := 0
	for _, row := range r.Results {
		tr := row.Tenants
		if tr == nil {
			continue
		}
		if row.Mode == ModeFloor {
			if tr.NoShares != "" {
				ew.Printf("floor: no shares: the groups' processes could not be weighted: %s\n", tr.NoShares)
			} else if tr.Weighted != "" {
				ew.Printf("floor: %s\n", tr.Weighted)
			}
			if cpus, ok := floorTenantCPUs(tr); ok && cpus < minFloorTenantCPUs {
				ew.Printf("floor: the groups' processes ran %.3f CPUs in all: other work kept the CPUs busy, and their shares say little\n", cpus)
			}
		}
		for i, g := range tr.Groups {
			cells := []string{"", "", ""}
			if i == 0 {
				cells = []string{row.Mode, "-", "-"}
				if row.Probe != nil {
					cells[1] = report.Ms(row.Probe.P99Ms)
				}
				if row.VsFloor != nil {
					cells[2] = report.Ms(row.VsFloor.P99X)
				}
			}
			for _, c := range tenantColumns {
				cells = append(cells, c.cell(g, tr.WindowS))
			}
			t.Row(cells...)
			rows++
		}
	}
	if rows == 0 {
		return ew.Err()
	}
	if err := ew.Err(); err != nil {
		return err
	}
	return t.Write(ew)
}

// minFloorTenantCPUs is the CPU the floor's groups must have used
// together, in CPUs over the window, for the table to let their shares
// stand without a warning: below it they ran in the gaps other work left,
// a few ms each (a trial with the load average at 15 gave them 0.004).
const minFloorTenantCPUs = 0.1

// floorTenantCPUs returns the CPUs the floor's groups' processes used
// together over the window, and whether every group's is known.
func floorTenantCPUs(tr *TenantsResult) (float64, bool) {
	if !(tr.WindowS > 0) {
		return 0, false
	}
	ms := 0.0
	for _, g := range tr.Groups {
		if g.CPUTimeMs == nil {
			return 0, false
		}
		ms += *g.CPUTimeMs
	}
	return ms / 1e3 / tr.WindowS, true
}

// pctOf formats a fraction as a percentage, or "-" for none.
func pctOf(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Pct(*v * 100)
}

// ratioOrDash formats a ratio to 2 decimals, or "-" for none.
func ratioOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}

// cpusOf formats ms of CPU over a window of windowS seconds as CPUs, or
// "-" for none.
func cpusOf(ms *float64, windowS float64) string {
	if ms == nil || !(windowS > 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", *ms/1e3/windowS)
}

// numOrDash formats a rate to the unit, or "-" for none.
func numOrDash(v *float64) string {
	if v == nil {
		return "-"
	}
	return report.Num(math.Round(*v))
}

// countOrDash formats a count, or "-" for none.
func countOrDash(v *int64) string {
	if v == nil {
		return "-"
	}
	return report.Num(float64(*v))
}
