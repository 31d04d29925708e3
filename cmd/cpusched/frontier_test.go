package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFrontierCommand: bad arguments are usage errors that name what was
// wrong, and a run's JSON makes a plot.
func TestFrontierCommand(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "no argument"},
		{[]string{"a"}, `argument "a"`},
		{[]string{"=x.json"}, `argument "=x.json"`},
		{[]string{"-step", "idle", "a=x.json"}, `-step "idle"`},
	} {
		var stdout, stderr bytes.Buffer
		if code := dispatch(context.Background(), append([]string{"frontier"}, tt.args...), &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("frontier %q: exit %d, %q; want 2 and %q", tt.args, code, stderr.String(), tt.want)
		}
	}
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(dir, "missing.json")
	if code := dispatch(context.Background(), []string{"frontier", "a=" + missing}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), missing) {
		t.Errorf("a missing file: exit %d, %q; want 1 and the file named", code, stderr.String())
	}
	run := filepath.Join("testdata", "bench-run.json")
	out := filepath.Join(dir, "f.png")
	stdout.Reset()
	stderr.Reset()
	if code := dispatch(context.Background(), []string{"frontier", "-o", out, "x=" + run + "," + run, "y=" + run}, &stdout, &stderr); code != 0 {
		t.Fatalf("frontier: exit %d, %s", code, stderr.String())
	}
	if data, err := os.ReadFile(out); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("frontier wrote no PNG to %s (%v)", out, err)
	}
}
