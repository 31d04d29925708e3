package unpriv

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cpusched/cpusched/cmd/internal/cli"
)

// A container's process, as /proc shows it (trimmed).
const (
	serviceStatus = "Name:\tcpusched\nUid:\t65534\t65534\t65534\t65534\nGid:\t65534\t65534\t65534\t65534\nGroups:\t\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
	rootStatus    = "Name:\tcpusched\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\t0 \nCapPrm:\t000001fffeffffff\nCapEff:\t000001fffeffffff\nCapAmb:\t0000000000000000\n"
	niceLimits    = "Limit                     Soft Limit           Hard Limit           Units     \nMax open files            1024                 1048576              files     \nMax nice priority         0                    0                    \nMax realtime priority     0                    0                    \n"
)

func TestStateParse(t *testing.T) {
	for _, tt := range []struct {
		status, limits string
		wantString     string
		wantService    string // "" for none: what the error names
	}{
		{serviceStatus, niceLimits, "uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0", ""},
		{rootStatus, strings.Replace(niceLimits, "Max nice priority         0                    0", "Max nice priority         unlimited            unlimited", 1),
			"uid 0, CAP_SYS_NICE, RLIMIT_NICE unlimited", "uids [0 0 0 0], gids [0 0 0 0], 1 supplementary groups, capabilities permitted 0x1fffeffffff, effective 0x1fffeffffff, ambient 0x0, RLIMIT_NICE -1/-1"},
	} {
		var s State
		err := s.parseStatus([]byte(tt.status))
		if err == nil {
			s.NiceSoft, s.NiceHard, err = parseNiceLimit([]byte(tt.limits))
		}
		if err != nil {
			t.Fatalf("parsing: %v", err)
		}
		if got := s.String(); got != tt.wantString {
			t.Errorf("String: got %q, want %q", got, tt.wantString)
		}
		err = s.Service()
		if (err == nil) != (tt.wantService == "") || err != nil && !strings.HasSuffix(err.Error(), tt.wantService) {
			t.Errorf("Service: got %v, want an error ending %q", err, tt.wantService)
		}
	}
	if s := ServiceState(); s.Service() != nil || s.String() != "uid 65534, no CAP_SYS_NICE, RLIMIT_NICE 0" {
		t.Errorf("ServiceState: got %q (%v), want the service's state", s, s.Service())
	}
}

func TestStateParseErrors(t *testing.T) {
	var s State
	for _, status := range []string{"", "Uid:\t0\t0\nGid:\t0\t0\t0\t0\n", strings.Replace(serviceStatus, "CapEff:\t0000000000000000", "CapEff:\tnothex", 1)} {
		if err := s.parseStatus([]byte(status)); err == nil {
			t.Errorf("status %q: got nil error, want one", status)
		}
	}
	for _, limits := range []string{"", "Max nice priority 0\n", "Max nice priority x 0\n"} {
		if _, _, err := parseNiceLimit([]byte(limits)); err == nil {
			t.Errorf("limits %q: got nil error, want one", limits)
		}
	}
}

func TestReadSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/limits"); err != nil {
		t.Skip("no /proc")
	}
	s, err := Read(0)
	if err != nil {
		t.Fatal(err)
	}
	if s.UIDs[1] != os.Geteuid() || s.GIDs[1] != os.Getegid() {
		t.Errorf("got uids %v gids %v, want the effective ones %d, %d", s.UIDs, s.GIDs, os.Geteuid(), os.Getegid())
	}
	// The test runs as itself, not as the wrapper makes a process (unless
	// it was itself started through the wrapper).
	if err, want := CheckService(0), s.Service(); (err == nil) != (want == nil) {
		t.Errorf("CheckService(0): got %v, want %v", err, want)
	}
	if err := CheckService(-1); err == nil {
		t.Error("CheckService(-1): got nil, want the error reading /proc/-1")
	}
}

func TestParseArgs(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		want    []string
		wantErr string
	}{
		{[]string{"--", "/bin/true", "-x"}, []string{"/bin/true", "-x"}, ""},
		{[]string{"/bin/true"}, []string{"/bin/true"}, ""},
		{nil, nil, "no command to run"},
		{[]string{"--"}, nil, "no command to run"},
		{[]string{"--", "true"}, nil, "absolute path"},
	} {
		got, err := parseArgs(tt.args, io.Discard)
		var ue *cli.UsageError
		switch {
		case tt.wantErr == "" && (err != nil || !slices.Equal(got, tt.want)):
			t.Errorf("%q: got %q, %v; want %q", tt.args, got, err, tt.want)
		case tt.wantErr != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%q: got %v, want a usage error containing %q", tt.args, err, tt.wantErr)
		}
	}
	if _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: got %v, want flag.ErrHelp", err)
	}
	if got := Wrap("/tmp/x/cpusched", []string{"serve", "-addr", "127.0.0.1:0"}); !slices.Equal(got, []string{Command, "--", "/tmp/x/cpusched", "serve", "-addr", "127.0.0.1:0"}) {
		t.Errorf("Wrap: got %q", got)
	}
}

// TestCopyExecutable: the copy has the program's bytes, in a directory
// every user may enter, both mode 0755, and remove takes them away.
func TestCopyExecutable(t *testing.T) {
	src := filepath.Join(t.TempDir(), "prog") // t.TempDir is 0700: as `go run`'s
	if err := os.WriteFile(src, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	copied, remove, err := CopyExecutable(src)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	data, err := os.ReadFile(copied)
	if err != nil || !bytes.Equal(data, []byte("#!/bin/sh\n")) || filepath.Base(copied) != "prog" {
		t.Errorf("got %s holding %q (%v), want prog's copy", copied, data, err)
	}
	for _, path := range []string{copied, filepath.Dir(copied)} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: got mode %v (%v), want 0755", path, fi.Mode().Perm(), err)
		}
	}
	if err := remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(copied)); !os.IsNotExist(err) {
		t.Errorf("after remove: got %v, want the directory gone", err)
	}
	if _, _, err := CopyExecutable(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Errorf("a missing program: got nil error, want one")
	}
}

// TestCopyExecutableUnderClosedDir: a TMPDIR other users cannot search is
// an error that says so, and leaves nothing behind.
func TestCopyExecutableUnderClosedDir(t *testing.T) {
	closed := t.TempDir() // 0700
	t.Setenv("TMPDIR", closed)
	if _, _, err := CopyExecutable(os.Args[0]); err == nil || !strings.Contains(err.Error(), "cannot be searched by other users") {
		t.Errorf("got %v, want an error about %s", err, closed)
	}
	if entries, _ := os.ReadDir(closed); len(entries) != 0 {
		t.Errorf("left %v behind in %s", entries, closed)
	}
}
