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
