package libtest

import (
	"bytes"
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/cpusched/cpusched"
	"github.com/google/pprof/profile"
)

// TestCPUProfileCarriesTaskLabels takes a CPU profile while a task spins and
// checks that the task's samples carry its class and group labels, so that
// `go tool pprof -tagfocus cpusched_class=batch` finds them.
func TestCPUProfileCarriesTaskLabels(t *testing.T) {
	for _, mode := range cpusched.IsolationModes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := newScheduler(t, cpusched.WithIsolation(mode))
			var buf bytes.Buffer
			if err := pprof.StartCPUProfile(&buf); err != nil {
				t.Skipf("cannot start a CPU profile (one already running?): %v", err)
			}
			err := s.Run(context.Background(), func(task *cpusched.Task) error {
				return spinFor(task, 300*time.Millisecond)
			}, cpusched.WithClass(cpusched.ClassBatch), cpusched.WithGroup("tenant-a"))
			pprof.StopCPUProfile()
			if err != nil {
				t.Fatal(err)
			}
			p, err := profile.Parse(&buf)
			if err != nil {
				t.Fatalf("parsing the profile: %v", err)
			}
			var spin, labelled int64
			for _, sample := range p.Sample {
				if !stackHas(sample, "libtest.spinFor") {
					continue
				}
				spin += sample.Value[0] // samples/count
				if strings.Join(sample.Label[cpusched.LabelClass], ",") == "batch" && strings.Join(sample.Label[cpusched.LabelGroup], ",") == "tenant-a" {
					labelled += sample.Value[0]
				}
			}
			if spin == 0 || labelled != spin {
				t.Errorf("%d of %d samples in spinFor carry %s=batch %s=tenant-a; want all, and at least one", labelled, spin, cpusched.LabelClass, cpusched.LabelGroup)
			}
		})
	}
}

// stackHas reports whether function fn is on sample's stack.
func stackHas(sample *profile.Sample, fn string) bool {
	for _, loc := range sample.Location {
		for _, line := range loc.Line {
			if line.Function != nil && strings.HasSuffix(line.Function.Name, fn) {
				return true
			}
		}
	}
	return false
}
