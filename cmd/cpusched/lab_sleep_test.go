package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/cpusched/cpusched/cmd/internal/lab/sleep"
)

func TestLabSleepUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown method", []string{"-methods", "usleep"}, `-methods: unknown method "usleep" (valid: none, sleep, timer, after, nanosleep, select, poll, gosched, yield, chan, busy)`},
		{"empty methods", []string{"-methods", ""}, "-methods must not be empty"},
		{"unknown mode", []string{"-modes", "fiber"}, `-modes: unknown mode "fiber" (valid: goroutine, locked)`},
		{"bad threads", []string{"-threads", "two"}, `-threads: "two" is not a count`},
		{"zero threads", []string{"-threads", "0"}, "-threads: each count must be in 1..1024, got 0"},
		{"negative outer", []string{"-outer", "-1"}, "-outer must be >= 1, got -1"},
		{"negative work", []string{"-work", "-4"}, "-work must be in 1..1048576 KiB, got -4"},
		{"negative budget", []string{"-budget", "-1s"}, "-budget must be >= 0"},
		{"extra argument", []string{"x"}, "unexpected argument"},
	}
	for _, tt := range tests {
		checkUsageError(t, append([]string{"lab", "sleep"}, tt.args...), tt.want)
	}
}

func TestLabChildSleep(t *testing.T) {
	var stdout, stderr bytes.Buffer
	args := []string{"lab-child", "sleep", "-method", "sleep", "-mode", "locked", "-threads", "2", "-sleep", "100us", "-outer", "3", "-inner", "1", "-work", "1"}
	if code := dispatch(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("got exit %d (%s), want 0", code, stderr.String())
	}
	var r sleep.CellResult
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("output %q: %v", stdout.String(), err)
	}
	if r.Method != "sleep" || r.Mode != "locked" || r.Threads != 2 || r.Iterations != 6 {
		t.Errorf("got %+v, want method sleep, mode locked, 2 threads, 6 iterations", r)
	}
	if code := dispatch(context.Background(), []string{"lab-child", "sleep", "-method", "usleep"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown method in child: got exit %d, want 2", code)
	}
}
