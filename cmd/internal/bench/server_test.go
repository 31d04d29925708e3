package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestParseListening(t *testing.T) {
	tests := []struct {
		line, url, banner string
		ok                bool
	}{
		{"cpusched serve: listening on http://127.0.0.1:4242 (isolation=none workers=2 gomaxprocs=2)",
			"http://127.0.0.1:4242", "isolation=none workers=2 gomaxprocs=2", true},
		{"listening on http://127.0.0.1:80/", "http://127.0.0.1:80", "", true},
		{"starting up", "", "", false},
		{"listening on 127.0.0.1:80", "", "", false},
	}
	for _, tt := range tests {
		url, banner, ok := parseListening(tt.line)
		if url != tt.url || banner != tt.banner || ok != tt.ok {
			t.Errorf("parseListening(%q): got (%q, %q, %v), want (%q, %q, %v)", tt.line, url, banner, ok, tt.url, tt.banner, tt.ok)
		}
	}
}

// alive reports whether pid is a live process (a zombie counts as gone).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return err != nil && !os.IsNotExist(err)
	}
	// "pid (comm) S ...": the state follows the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestStopKillsChildThatIgnoresSIGTERM(t *testing.T) {
	defer func(g time.Duration) { stopGrace = g }(stopGrace)
	stopGrace = 300 * time.Millisecond
	// The shell ignores SIGTERM, and so does the sleep it starts in the
	// background (ignored signals stay ignored across exec).
	c, err := startChild("sh", "-c", `trap "" TERM; sleep 60 & echo $!; wait`)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := c.stdout.Read(buf)
	if err != nil {
		c.stop()
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	grandchild, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		c.stop()
		t.Fatalf("reading the grandchild's pid from %q: %v", buf[:n], err)
	}
	pid := c.cmd.Process.Pid

	start := time.Now()
	err = c.stop()
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("stop: got error %v, want one saying it was killed", err)
	}
	if took > 5*time.Second {
		t.Errorf("stop took %v, want it bounded by the grace period plus a little (limit 5s)", took)
	}
	if alive(pid) {
		t.Errorf("child %d: got alive after stop, want gone", pid)
	}
	// The grandchild is reaped by init, not by us: give that a moment.
	deadline := time.Now().Add(5 * time.Second)
	for alive(grandchild) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if alive(grandchild) {
		t.Errorf("grandchild %d: got alive after stop, want gone", grandchild)
	}
	if err2 := c.stop(); err2 != err {
		t.Errorf("second stop: got %v, want the first result %v", err2, err)
	}
}

func TestStopAfterSIGTERMIsClean(t *testing.T) {
	c, err := startChild("sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.stop(); err != nil {
		t.Errorf("stop of a child that exits on SIGTERM: got %v, want nil", err)
	}
}

func TestStartServerFailures(t *testing.T) {
	defer func(d time.Duration) { startTimeout = d }(startTimeout)
	startTimeout = 500 * time.Millisecond
	tests := []struct {
		name    string
		script  string
		wantErr []string
	}{
		{"exits", `echo "no such flag -isolation" >&2; exit 2`, []string{"exited before it printed its address", "no such flag -isolation"}},
		{"silent", `echo starting >&2; sleep 60`, []string{`did not print "listening on http://..." within 500ms`, "starting"}},
		{"not answering", `echo "listening on http://127.0.0.1:1 (test)"; sleep 60`, []string{"/stats did not answer 200 within 500ms"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, err := startServer(context.Background(), childPlace{}, "sh", []string{"-c", tt.script})
			if err == nil {
				srv.stop()
				t.Fatal("got nil error, want one")
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got error %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestLending(t *testing.T) {
	at := func(iso string, uptime float64, lends uint64, lentMS float64) serverStats {
		var st serverStats
		st.Uptime, st.Scheduler.Isolation, st.Scheduler.Lends, st.Scheduler.LentTimeMS = uptime, iso, lends, lentMS
		return st
	}
	lends, slots := lending(at("ospriority", 10, 3, 500), at("ospriority", 12, 5, 2100))
	if lends == nil || slots == nil || *lends != 2 || math.Abs(*slots-0.8) > 1e-9 {
		t.Errorf("2 s with 1.6 s of slot time lent and 2 lends: got %v, %v; want 2 and 0.8 slots", lends, slots)
	}
	if lends, slots := lending(at("none", 10, 0, 0), at("none", 12, 0, 0)); lends != nil || slots != nil {
		t.Errorf("isolation none: got %v, %v; want nil, nil", lends, slots)
	}
	if lends, slots := lending(at("ospriority", 12, 5, 0), at("ospriority", 10, 3, 0)); lends != nil || slots != nil {
		t.Errorf("counters going back (another server): got %v, %v; want nil, nil", lends, slots)
	}
}

func TestContention(t *testing.T) {
	at := func(iso string, uptime, contendedMS float64) serverStats {
		var st serverStats
		st.Uptime, st.Scheduler.Isolation, st.Scheduler.ContendedTimeMS = uptime, iso, contendedMS
		return st
	}
	for _, tt := range []struct {
		name          string
		before, after serverStats
		want          float64 // -1: nil
	}{
		{"half of 2 s", at("ospriority", 10, 500), at("ospriority", 12, 1500), 50},
		{"none of it", at("ospriority", 10, 500), at("ospriority", 12, 500), 0},
		{"clock skew past the whole window", at("ospriority", 10, 0), at("ospriority", 12, 2100), 100},
		{"isolation none", at("none", 10, 0), at("none", 12, 0), -1},
		{"no time between", at("ospriority", 10, 0), at("ospriority", 10, 0), -1},
	} {
		got := contention(tt.before, tt.after)
		switch {
		case tt.want < 0 && got != nil:
			t.Errorf("%s: got %v, want nil", tt.name, *got)
		case tt.want >= 0 && (got == nil || math.Abs(*got-tt.want) > 1e-9):
			t.Errorf("%s: got %v, want %v%%", tt.name, got, tt.want)
		}
	}
}
