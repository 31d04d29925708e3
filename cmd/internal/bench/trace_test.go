package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunWithTrace: with TraceDir, the two scheduled-load steps record a
// trace whose probe requests are matched to the client's latencies, and
// their rows name the attribution file. TraceAbove at its minimum makes
// every matched request slow, which the default threshold would not.
func TestRunWithTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo server; skipped with -short")
	}
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	cfg := DefaultConfig(cpuschedBin, "serve")
	cfg.Modes = []string{AllModes()[len(AllModes())-1]}
	cfg.Step, cfg.Warmup, cfg.Settle = 500*time.Millisecond, 100*time.Millisecond, 50*time.Millisecond
	cfg.ProbeRate, cfg.HogConcurrency, cfg.SmallRate = 100, 4, 50
	cfg.TraceDir = filepath.Join(t.TempDir(), "traces")
	cfg.TraceAbove = MinTraceAbove
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, row := range rep.Results {
		traced := row.Step == StepHogSched || row.Step == StepHogSchedSm
		if (row.Attribution != "") != traced {
			t.Errorf("%s: attribution %q, want one only for %s and %s", row.Step, row.Attribution, StepHogSched, StepHogSchedSm)
		}
		if !traced || row.Attribution == "" {
			continue
		}
		text, err := os.ReadFile(row.Attribution)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(strings.TrimSuffix(row.Attribution, ".txt") + ".trace"); err != nil {
			t.Errorf("%s: %v", row.Step, err)
		}
		if !bytes.HasPrefix(text, []byte("slow: client latency above 0.001 ms (-trace-above)\n")) {
			t.Errorf("%s: the breakdown does not begin with the -trace-above threshold:\n%s", row.Step, text)
		}
		var secs, above float64
		var probes, matched, followed, slow int
		line := string(text[max(0, bytes.Index(text, []byte("trace: "))):])
		if _, err := fmt.Sscanf(line, "trace: %f s, %d probe requests traced, %d matched to a client latency (%d followed), %d slower than %f ms",
			&secs, &probes, &matched, &followed, &slow, &above); err != nil {
			t.Fatalf("%s: cannot read the counts in %q: %v", row.Step, line, err)
		}
		if probes == 0 || matched != probes {
			t.Errorf("%s: %d probe requests traced, %d matched; want some, all matched", row.Step, probes, matched)
		}
		if slow != matched {
			t.Errorf("%s: %d of %d matched requests slower than %v ms; want all of them with TraceAbove %v", row.Step, slow, matched, above, MinTraceAbove)
		}
	}
}
