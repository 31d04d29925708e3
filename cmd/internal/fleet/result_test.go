package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v3orcapb "github.com/cncf/xds/go/xds/data/orca/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cpusched/cpusched/internal/loadreport"
)

// fakeRow returns the result of a row whose calls all took latency and
// went to the replicas in the proportions of shares, the first replica
// failing errors of its calls; with errors, one more call failed before a
// replica was picked.
func fakeRow(t *testing.T, scenario, policy string, latency time.Duration, shares []int, errors int) Result {
	t.Helper()
	rec := newRecording(len(shares))
	procs := make([]*replicaProc, len(shares))
	for r, n := range shares {
		procs[r] = &replicaProc{spec: replicaSpec{batch: r == 0 && scenario == ScenarioBatch}, hello: hello{CPULimit: 0.8, GOMAXPROCS: 2, Workers: 1, Isolation: "ospriority"}}
		for i := range n {
			var err error
			if r == 0 && i < errors {
				err = status.Error(codes.DeadlineExceeded, "late")
			}
			rec.record(mix[i%len(mix)], r, latency, err, &v3orcapb.OrcaLoadReport{ApplicationUtilization: 0.5, CpuUtilization: 0.25,
				RequestCost: map[string]float64{loadreport.RunCost: 6, loadreport.QueueWaitCost: 1}})
		}
	}
	if errors > 0 {
		rec.record(fast, -1, time.Millisecond, status.Error(codes.Unavailable, "no replica"), nil)
	}
	return newResult(scenario, policy, 100, procs, rec, window{seconds: 2, machineBusy: 50, clientCPU: 0.25, cpuUsed: []float64{0.5, math.NaN()}, batchPasses: []int64{1000, 0}})
}

func TestNewResult(t *testing.T) {
	res := fakeRow(t, ScenarioBatch, PolicyWRR, 10*time.Millisecond, []int{30, 10}, 3)
	if res.Calls != 41 || res.Errors != 4 || res.Unpicked != 1 {
		t.Errorf("calls %d, errors %d, unpicked %d; want 41, 4, 1", res.Calls, res.Errors, res.Unpicked)
	}
	if res.ReqS != (41-4)/2.0 {
		t.Errorf("req/s %v, want %v", res.ReqS, (41-4)/2.0)
	}
	if math.Abs(res.P99Ms-10) > 0.1 || res.P50Ms > res.P99Ms || res.P99Ms > res.MaxMs {
		t.Errorf("p50 %v, p99 %v, max %v: want p99 about 10 ms, in order", res.P50Ms, res.P99Ms, res.MaxMs)
	}
	if res.ErrorsByCode["DeadlineExceeded"] != 3 || res.ErrorsByCode["Unavailable"] != 1 {
		t.Errorf("errors by code %v", res.ErrorsByCode)
	}
	if len(res.Methods) != numMethods || res.Methods[heavy].Method != MethodHeavy || res.Methods[heavy].Calls != 20 {
		t.Errorf("methods %+v: want heavy first with 20 calls", res.Methods)
	}
	r0, r1 := res.Replicas[0], res.Replicas[1]
	if r0.Share != 0.75 || r1.Share != 0.25 || r0.Errors != 3 || !r0.Batch || r1.Batch {
		t.Errorf("replicas %+v, %+v: want shares 0.75 and 0.25, 3 errors and the batch job on the first", r0, r1)
	}
	if r0.P99Ms == nil || math.Abs(*r0.P99Ms-10) > 0.1 || r0.ThrottledPct != nil {
		t.Errorf("replica 0: p99 %v, throttled %v: want about 10 ms, and null without a quota", r0.P99Ms, r0.ThrottledPct)
	}
	if r0.CPUUsed == nil || *r0.CPUUsed != 0.5 || r1.CPUUsed != nil {
		t.Errorf("cpu used %v, %v: want 0.5 and null", r0.CPUUsed, r1.CPUUsed)
	}
	if r0.HeavyRunMs == nil || *r0.HeavyRunMs != 6 || *r0.HeavyQueueWaitMs != 1 {
		t.Errorf("replica 0: heavy run %v, wait %v; want 6 and 1", r0.HeavyRunMs, r0.HeavyQueueWaitMs)
	}
	if r0.ReportedApp == nil || *r0.ReportedApp != 0.5 || *r0.ReportedCPU != 0.25 || r0.BatchPassesPerS != 500 {
		t.Errorf("replica 0: reported %v/%v, batch passes/s %v", r0.ReportedApp, r0.ReportedCPU, r0.BatchPassesPerS)
	}
	if res.MachineBusyPct == nil || *res.MachineBusyPct != 50 || res.ClientCPU == nil || *res.ClientCPU != 0.25 {
		t.Errorf("machine busy %v, client cpu %v: want 50 and 0.25", res.MachineBusyPct, res.ClientCPU)
	}
}

// TestNewResultEmpty: a row without calls has null percentiles, not NaN
// (which JSON cannot hold).
func TestNewResultEmpty(t *testing.T) {
	res := newResult(ScenarioBatch, PolicyWRR, 1, nil, newRecording(0), window{seconds: 1, machineBusy: math.NaN(), clientCPU: math.NaN()})
	if !math.IsNaN(res.P99Ms) || res.MachineBusyPct != nil {
		t.Errorf("p99 %v, machine busy %v", res.P99Ms, res.MachineBusyPct)
	}
}

func TestTargets(t *testing.T) {
	ms := time.Millisecond
	good := []Result{
		fakeRow(t, ScenarioQuota, PolicyRoundRobin, 1000*ms, []int{10, 10, 10}, 2),
		fakeRow(t, ScenarioQuota, PolicyWRR, 10*ms, []int{4, 13, 13}, 0),
		fakeRow(t, ScenarioQuota, PolicyWRRCPU, 9*ms, []int{4, 13, 13}, 0),
		fakeRow(t, ScenarioBatch, PolicyRoundRobin, 30*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioBatch, PolicyWRR, 20*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioBatch, PolicyWRRCPU, 90*ms, []int{3, 13, 13}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyRoundRobin, 1000*ms, []int{10, 10, 10}, 3),
		fakeRow(t, ScenarioNeighbor, PolicyWRR, 690*ms, []int{2, 14, 14}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyWRRCPU, 1500*ms, []int{20, 5, 5}, 9),
	}
	ts := targets(good)
	if len(ts) != 10 {
		t.Fatalf("%d targets, want 10: %+v", len(ts), ts)
	}
	for _, tg := range ts {
		if !tg.Held {
			t.Errorf("%s: %s: not held (%s)", tg.Scenario, tg.Target, tg.Detail)
		}
	}

	bad := []Result{
		fakeRow(t, ScenarioQuota, PolicyRoundRobin, 10*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioQuota, PolicyWRR, 20*ms, []int{12, 9, 9}, 1),
		fakeRow(t, ScenarioQuota, PolicyWRRCPU, 10*ms, []int{4, 13, 13}, 0),
		fakeRow(t, ScenarioBatch, PolicyRoundRobin, 20*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioBatch, PolicyWRR, 23*ms, []int{5, 13, 13}, 0),
		fakeRow(t, ScenarioBatch, PolicyWRRCPU, 20*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyRoundRobin, 1000*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyWRR, 710*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioNeighbor, PolicyWRRCPU, 710*ms, []int{10, 10, 10}, 0),
	}
	for _, tg := range targets(bad) {
		if tg.Held {
			t.Errorf("%s: %s: held (%s), want not", tg.Scenario, tg.Target, tg.Detail)
		}
	}
	// The batch replica's share within 10% of round robin's: above it
	// misses too.
	over := []Result{
		fakeRow(t, ScenarioBatch, PolicyRoundRobin, 20*ms, []int{10, 10, 10}, 0),
		fakeRow(t, ScenarioBatch, PolicyWRR, 20*ms, []int{15, 10, 10}, 0),
	}
	for _, tg := range targets(over) {
		if strings.Contains(tg.Target, "share") && tg.Held {
			t.Errorf("a share of 43%% against 33%%: %s held (%s), want not", tg.Target, tg.Detail)
		}
	}

	// A target whose rows were not measured is left out.
	if ts := targets(good[3:5]); len(ts) != 2 || ts[0].Scenario != ScenarioBatch {
		t.Errorf("batch's round_robin and weighted_round_robin alone: %+v, want their 2 targets", ts)
	}
}

func testReport(t *testing.T) *Report {
	cfg, heavy := DefaultConfig("cpusched").withRates(func() time.Duration { return 2 * time.Millisecond })
	rep := &Report{Config: cfg.reportConfig(), Cgroup: "cgroup v1 /sys/fs/cgroup/cpu",
		Skipped: []Skipped{{ScenarioQuota, "no cgroups"}}}
	for _, p := range Policies() {
		rep.Results = append(rep.Results, fakeRow(t, ScenarioBatch, p, 5*time.Millisecond, []int{10, 10, 10}, 0))
	}
	rep.Targets = targets(rep.Results)
	rep.Config.HeavyMs = heavy.Seconds() * 1e3
	return rep
}

func TestWriteTable(t *testing.T) {
	var out bytes.Buffer
	if err := testReport(t).WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"heavy 50% (500 CRC passes)", "rates: quota 900, batch 1,020, neighbor 600 calls/s; the defaults (450, 510, 300) scaled to a heavy call's work here, 2.00 ms against 4.00", "p99.9", "weighted_round_robin_cpu", "procs/workers", "reported app",
		"skipped: quota: no cgroups", "targets:", "batch: weighted_round_robin p99 < weighted_round_robin_cpu's: NOT held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
	if err := testReport(t).WriteTable(failingWriter{}); err == nil {
		t.Error("WriteTable to a failing writer: no error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestWriteJSON: the fields docs/grpc.md names are there, under those names.
func TestWriteJSON(t *testing.T) {
	var out bytes.Buffer
	if err := testReport(t).WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []map[string]any `json:"results"`
		Targets []map[string]any `json:"targets"`
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 3 || doc.Results[2]["policy"] != PolicyWRRCPU {
		t.Fatalf("results %v", doc.Results)
	}
	for _, k := range []string{"scenario", "policy", "p50_ms", "p99_ms", "p99_9_ms", "errors", "req_s", "methods", "replicas"} {
		if _, ok := doc.Results[0][k]; !ok {
			t.Errorf("a result lacks %q: %v", k, doc.Results[0])
		}
	}
	replica := doc.Results[0]["replicas"].([]any)[0].(map[string]any)
	for _, k := range []string{"share", "cpu_limit", "batch", "neighbor", "cpu_used", "p99_ms", "throttled_pct", "neighbor_passes_per_s"} {
		if _, ok := replica[k]; !ok {
			t.Errorf("a replica lacks %q: %v", k, replica)
		}
	}
	if len(doc.Targets) == 0 {
		t.Error("no targets")
	}
}

func TestWritePlots(t *testing.T) {
	dir := t.TempDir()
	p99, share := filepath.Join(dir, P99Plot), filepath.Join(dir, SharePlot)
	if err := testReport(t).WritePlots(p99, share); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{p99, share} {
		if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", p, err)
		}
	}
	if err := (&Report{}).WritePlots(p99, share); err == nil {
		t.Error("WritePlots without results: no error")
	}
}
