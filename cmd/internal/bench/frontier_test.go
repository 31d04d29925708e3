package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFrontierOf(t *testing.T) {
	dir := t.TempDir()
	// A report written as bench -json writes it reads back.
	data, err := json.Marshal(handMadeReport())
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "run.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run, err := ReadReport(file)
	if err != nil {
		t.Fatal(err)
	}
	sets := []FrontierSetting{{Name: "a", Runs: []*Report{run, handMadeReport()}}, {Name: "b", Runs: []*Report{handMadeReport()}}}
	for _, step := range frontierSteps {
		path := filepath.Join(dir, step+".png")
		if err := WriteFrontierOf(path, step, sets); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		checkPNG(t, path)
	}
	if err := WriteFrontierOf(filepath.Join(dir, "x.png"), StepIdle, sets); err == nil || !strings.Contains(err.Error(), "want one of") {
		t.Errorf("step idle: got %v, want an error naming the steps", err)
	}
	// A run without the floor names its setting and run.
	noFloor := handMadeReport()
	noFloor.Results = noFloor.Results[5:]
	err = WriteFrontierOf(filepath.Join(dir, "y.png"), StepHogSched, []FrontierSetting{{Name: "c", Runs: []*Report{handMadeReport(), noFloor}}})
	if err == nil || !strings.Contains(err.Error(), `setting "c", run 2`) {
		t.Errorf("no floor: got %v, want an error naming setting c, run 2", err)
	}
}

func TestReadReportRejects(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{"garbage": "not json", "empty": `{"results": []}`} {
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadReport(file); err == nil || !strings.Contains(err.Error(), "not a bench report") {
			t.Errorf("%s: got %v, want a not-a-bench-report error", name, err)
		}
	}
}

// TestWriteFrontierOfStepAlone: runs of io-heavy alone (no hog-direct, so
// no share of direct) are drawn against the floor's throughput in the
// same step, the floor at 100%.
func TestWriteFrontierOfStepAlone(t *testing.T) {
	alone := handMadeReport()
	var rows []Result
	for _, row := range alone.Results {
		if row.Step == StepIOHeavy {
			row.Hog.PctOfDirect = nil
			rows = append(rows, row)
		}
	}
	alone.Results = rows
	sets := []FrontierSetting{{Name: "a", Runs: []*Report{alone}}}
	byFloor, label := frontierX(StepIOHeavy, sets)
	if !byFloor || !strings.Contains(label, "of the floor's") {
		t.Fatalf("frontierX: %v, %q; want the floor's throughput", byFloor, label)
	}
	var got []float64
	for _, row := range rows {
		got = append(got, xOf(row, byFloor, row.Mode == ModeFloor))
	}
	if len(got) != 2 || got[0] != 100 || got[1] != 140 {
		t.Errorf("x of the floor and none: %v, want [100 140] (210,000 passes/s against 150,000)", got)
	}
	path := filepath.Join(t.TempDir(), "alone.png")
	if err := WriteFrontierOf(path, StepIOHeavy, sets); err != nil {
		t.Fatal(err)
	}
	checkPNG(t, path)
	if byFloor, _ := frontierX(StepIOHeavy, []FrontierSetting{{Name: "b", Runs: []*Report{handMadeReport()}}}); byFloor {
		t.Error("frontierX of a run with hog-direct: the floor's throughput, want direct's")
	}
}
