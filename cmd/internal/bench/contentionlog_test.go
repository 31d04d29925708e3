package bench

import (
	"bytes"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"
)

// TestContendedMessageMatchesLibrary: the bench finds the turns to
// contended by their message, so the library must still log it.
func TestContendedMessageMatchesLibrary(t *testing.T) {
	src, err := os.ReadFile("../../../contention.go")
	if err != nil {
		t.Skipf("the library's source is not beside this module: %v", err)
	}
	if !bytes.Contains(src, []byte(`s.log.Info("`+contendedMsg)) {
		t.Errorf("contention.go no longer logs %q: the bench would find no turn to contended", contendedMsg)
	}
	for _, key := range []string{`"rule"`, `"others_cpus"`, `"cpus"`, `"starved_windows"`} {
		if !bytes.Contains(src, []byte(key)) {
			t.Errorf("contention.go no longer logs the attribute %s", key)
		}
	}
}

// contendedLine is the line slog's text handler writes for a turn to
// contended, as the demo server logs it.
func contendedLine(rule string, others float64, starved int) string {
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info(contendedMsg+"; task threads run at normal priority",
		"cpu_budget", 2.0, "rule", rule, "others_cpus", others, "cpus", 2.0, "starved_windows", starved)
	return buf.String()
}

func TestParseContendedLine(t *testing.T) {
	tests := []struct {
		line string
		want ContentionSwitch
		ok   bool
	}{
		{contendedLine("others busy", 1.83, 0), ContentionSwitch{Rule: "others busy", OthersCPUs: 1.83, CPUs: 2}, true},
		{contendedLine("a lowered thread starved long", 0.6, 10), ContentionSwitch{Rule: "a lowered thread starved long", OthersCPUs: 0.6, CPUs: 2, StarvedWindows: 10}, true},
		{`time=2026-12-06T11:18:32.226Z level=INFO msg="cpusched: scheduler started" isolation=ospriority workers=2`, ContentionSwitch{}, false},
		{`time=x level=INFO msg="cpusched: the other processes have gone quiet; long tasks' threads are lowered again" contended_for=1.2s`, ContentionSwitch{}, false},
		{"cpusched serve: listening on http://127.0.0.1:1 (isolation=ospriority)", ContentionSwitch{}, false},
		{`msg="unterminated`, ContentionSwitch{}, false},
		{"", ContentionSwitch{}, false},
	}
	for _, tt := range tests {
		got, ok := parseContendedLine(strings.TrimSuffix(tt.line, "\n"))
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseContendedLine(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}

// TestLogWatch: lines split across writes are put together, only the turns
// to contended are kept, and between picks those of a window.
func TestLogWatch(t *testing.T) {
	var w logWatch
	start := time.Now()
	first := contendedLine("others busy", 1.9, 0)
	write := func(s string) {
		if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write: %d, %v", n, err)
		}
	}
	write("time=x level=INFO msg=\"cpusched: scheduler started\"\n" + first[:20])
	write(first[20:])
	mid := time.Now()
	time.Sleep(time.Millisecond)
	write(contendedLine("a lowered thread starved, others busy", 0.9, 2) + "unfinished line with no newline")
	end := time.Now()

	all := w.between(time.Time{}, end, start)
	if len(all) != 2 || all[0].Rule != "others busy" || all[1].Rule != "a lowered thread starved, others busy" || all[1].StarvedWindows != 2 {
		t.Fatalf("between(server start, end): got %+v, want the two turns", all)
	}
	if all[0].AtS < 0 || all[1].AtS < all[0].AtS {
		t.Errorf("AtS from the window's start: got %v, %v", all[0].AtS, all[1].AtS)
	}
	if got := w.between(mid, end, mid); len(got) != 1 || got[0].Rule != all[1].Rule {
		t.Errorf("between(mid, end): got %+v, want the second turn only", got)
	}
	if got := w.between(end, time.Now(), end); got != nil {
		t.Errorf("between(end, now): got %+v, want none", got)
	}
	var none *logWatch
	if got := none.between(time.Time{}, end, start); got != nil {
		t.Errorf("a nil logWatch: got %+v", got)
	}
}

// TestContentionCauses: the findings name the rule of each turn to
// contended in a step with no neighbour, and leave out the neighbor step's
// on the whole machine, where the neighbour is meant to contend.
func TestContentionCauses(t *testing.T) {
	rows := []Result{
		{Mode: "ospriority", Step: StepHogSched, Contentions: []ContentionSwitch{{AtS: 2.25, Rule: "others busy", OthersCPUs: 1.2, CPUs: 2}}},
		{Mode: "ospriority", Step: StepIOHeavy},
		{Mode: "ospriority", Step: StepNeighbor, Contentions: []ContentionSwitch{{AtS: -0.4, Rule: "others busy", OthersCPUs: 1.9, CPUs: 2}}},
		{Mode: "reserve", Step: StepHogSched},
	}
	rep := &Report{Machine: Machine{CPUs: 2}, Results: rows}
	rep.Config.Shape = shape{}.report(DefaultConfig("x"))
	const want = `turned contended with no neighbour on its CPUs (the guard's rule, when from the window's start, its reading): hog-sched: "others busy" at +2.2 s, the others on 1.20 of 2 CPUs`
	if got := rep.contentionCauses("ospriority"); got != want {
		t.Errorf("the whole machine: got\n%q, want\n%q", got, want)
	}
	if got := rep.contentionCauses("reserve"); got != "" {
		t.Errorf("a mode with no turn: got %q, want none", got)
	}
	rep.Config.Shape = shape{serverCPUs: []int{0}, otherCPUs: []int{1}}.report(Config{CPUSet: true, NeighborConcurrency: 1})
	if got := rep.contentionCauses("ospriority"); !strings.HasSuffix(got, `neighbor: "others busy" at -0.4 s, the others on 1.90 of 2 CPUs`) {
		t.Errorf("cpuset: got %q, want the neighbor step's turn too", got)
	}
	var doc bytes.Buffer
	if err := rep.WriteJSON(&doc); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.String(), `"contentions": [`) || !strings.Contains(doc.String(), `"rule": "others busy"`) {
		t.Errorf("the JSON has no contentions:\n%s", doc.String())
	}
}
