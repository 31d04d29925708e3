package cpusched

import (
	"bytes"
	"context"
	"errors"
	"log"
	"log/slog"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/internal/osprio"
)

// labelsHere returns the pprof labels of the calling goroutine, as the
// goroutine profile prints them ("" for none).
func labelsHere() string {
	var b strings.Builder
	pprof.Lookup("goroutine").WriteTo(&b, 1)
	for _, record := range strings.Split(b.String(), "\n\n") {
		if !strings.Contains(record, "cpusched.labelsHere") {
			continue
		}
		for _, line := range strings.Split(record, "\n") {
			if l, ok := strings.CutPrefix(line, "# labels: "); ok {
				return l
			}
		}
		return ""
	}
	return "not found"
}

// TestGoroutineLabels checks the labels inside tasks, merged with the
// caller's as pprof.Do merges them, and given back when Run returns.
func TestGoroutineLabels(t *testing.T) {
	for _, mode := range IsolationModes() {
		t.Run(mode.String(), func(t *testing.T) {
			s := newTestScheduler(t, WithIsolation(mode))
			plain := context.Background()
			route := pprof.WithLabels(plain, pprof.Labels("route", "/x"))
			tests := []struct {
				name       string
				ctx        context.Context
				goTask     bool
				opts       []TaskOption
				want       string
				wantBefore string // the caller's labels, before and after Run
			}{
				{"run", plain, false, nil, `{"cpusched_class":"normal"}`, ""},
				{"run in a group", plain, false, []TaskOption{WithGroup("g"), WithClass(ClassIdle)}, `{"cpusched_class":"idle", "cpusched_group":"g"}`, ""},
				{"run with caller labels", route, false, []TaskOption{WithGroup("g")}, `{"cpusched_class":"normal", "cpusched_group":"g", "route":"/x"}`, `{"route":"/x"}`},
				{"go", plain, true, []TaskOption{WithClass(ClassRealtime)}, `{"cpusched_class":"realtime"}`, ""},
				{"go with caller labels", route, true, nil, `{"cpusched_class":"normal", "route":"/x"}`, `{"route":"/x"}`},
			}
			for _, tt := range tests {
				pprof.SetGoroutineLabels(tt.ctx)
				var inside string
				fn := func(*Task) error { inside = labelsHere(); return nil }
				var err error
				if tt.goTask {
					var h *Handle
					if h, err = s.Go(tt.ctx, fn, tt.opts...); err == nil {
						err = h.Wait()
					}
				} else {
					err = s.Run(tt.ctx, fn, tt.opts...)
				}
				after := labelsHere()
				pprof.SetGoroutineLabels(context.Background())
				if err != nil {
					t.Fatalf("%s: %v", tt.name, err)
				}
				if inside != tt.want || after != tt.wantBefore {
					t.Errorf("%s: labels inside %s, after %q; want %s, %q", tt.name, inside, after, tt.want, tt.wantBefore)
				}
			}
		})
	}
}

// TestLogger checks the events WithLogger receives, and that the default is
// silence, also on the standard logger.
func TestLogger(t *testing.T) {
	var std bytes.Buffer
	defer log.SetOutput(log.Writer())
	log.SetOutput(&std)

	denied := withOS(func() error { return errors.New("setpriority: operation not permitted") }, nil, nil)
	s, err := New(WithIsolation(IsolationOSPriority), denied) // falls back, silently
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	if std.Len() != 0 {
		t.Errorf("without WithLogger, the standard logger got %q; want nothing", std.String())
	}

	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	s, err = New(WithIsolation(IsolationOSPriority), WithLogger(logger), denied)
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	for _, want := range []string{"level=WARN msg=\"cpusched: IsolationOSPriority unavailable", "operation not permitted", "msg=\"cpusched: scheduler started\" isolation=reserve"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}

	if !osprio.Supported() || probeOSPriority() != nil {
		return
	}
	buf.Reset()
	before := runtime.GOMAXPROCS(0)
	s, err = New(WithIsolation(IsolationOSPriority), WithWorkers(before+1), WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	for _, want := range []string{"isolation=ospriority", "raised GOMAXPROCS", "GOMAXPROCS restored"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}
