package bench

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLauncherByUser: how the children run, by the bench's user and
// Privileged, and what the report says of it.
func TestLauncherByUser(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	type launch struct {
		name           string
		euid           int
		privileged     bool
		wantService    bool
		wantPrivileged bool
		wantServer     string
		wantNote       string
	}
	tests := []launch{
		{"root -privileged", 0, true, false, true, "privileged (root)", "-privileged; without it they run uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0"},
		{"not root", 1000, false, false, false, "unprivileged (uid ", "the bench is not root"},
	}
	if runtime.GOOS == "linux" {
		tests = append(tests, launch{"root", 0, false, true, false, "unprivileged (uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0)", "as a container runs a service"})
	} else {
		tests = append(tests, launch{"root", 0, false, false, true, "privileged (root)", "is Linux-only"})
	}
	for _, tt := range tests {
		geteuid = func() int { return tt.euid }
		cfg := DefaultConfig("cpusched", "serve")
		cfg.Privileged = tt.privileged
		l, err := newLauncher(cfg)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if l.asService != tt.wantService || l.privileged != tt.wantPrivileged || !strings.HasPrefix(l.server, tt.wantServer) || !strings.Contains(l.note, tt.wantNote) {
			t.Errorf("%s: got as a service %v, privileged %v, %q: %q; want %v, %v, %q...: ...%q...",
				tt.name, l.asService, l.privileged, l.server, l.note, tt.wantService, tt.wantPrivileged, tt.wantServer, tt.wantNote)
		}
		if name, args, err := l.command([]string{"serve"}); !tt.wantService && (err != nil || name != "cpusched" || len(args) != 1) {
			t.Errorf("%s: got command %q %q (%v), want cpusched's as it is", tt.name, name, args, err)
		}
	}
}

// TestRunPrivilegedNotRoot: Privileged in a bench that is not root fails
// with ErrPrivileged before anything starts (the binary does not exist).
func TestRunPrivilegedNotRoot(t *testing.T) {
	defer func(f func() int) { geteuid = f }(geteuid)
	geteuid = func() int { return 1000 }
	cfg := DefaultConfig(filepath.Join(t.TempDir(), "no-such-cpusched"), "serve")
	cfg.Privileged = true
	rep, err := Run(context.Background(), cfg)
	if rep != nil || !errors.Is(err, ErrPrivileged) || !strings.Contains(err.Error(), "uid 1000") {
		t.Errorf("got (%v, %v), want (nil, ErrPrivileged naming uid 1000)", rep, err)
	}
}

// TestRetirement: only ospriority's rows have the raisable state and the
// threads retired, and left loose, in the window.
func TestRetirement(t *testing.T) {
	stats := func(isolation string, raisable bool, retired, loose uint64) serverStats {
		var st serverStats
		sc := &st.Scheduler
		sc.Isolation, sc.ThreadsRaisable, sc.RetiredThreads, sc.LooseThreads = isolation, raisable, retired, loose
		return st
	}
	if r, n, l := retirement(stats("reserve", false, 0, 0), stats("reserve", false, 0, 0)); r != nil || n != nil || l != nil {
		t.Errorf("reserve: got %v, %v, %v; want nil, nil, nil", r, n, l)
	}
	if r, n, l := retirement(stats("ospriority", false, 4, 1), stats("ospriority", false, 11, 2)); r == nil || *r || n == nil || *n != 7 || l == nil || *l != 1 {
		t.Errorf("ospriority: got %v, %v, %v; want false, 7 retired and 1 loose", r, n, l)
	}
}
