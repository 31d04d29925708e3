package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLabSwitchUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-procs", ""}, "-procs: empty list"},
		{[]string{"-procs", "0"}, "-procs: 0 out of range (valid: 1..1024)"},
		{[]string{"-procs", "a"}, `-procs: "a" is not an integer`},
		{[]string{"-buffer", "-5"}, "-buffer: -5 is negative"},
		{[]string{"-buffer", ","}, "-buffer: empty list"},
		{[]string{"-clients", "-1"}, "-clients: -1 out of range"},
		{[]string{"-workloads", "spin"}, `-workloads: unknown workload "spin" (valid: busy,gosched,chan,cpusched)`},
		{[]string{"-workloads", ""}, "-workloads: empty list"},
		{[]string{"-duration", "1ms"}, "-duration: 1ms out of range"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"-nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		checkUsageError(t, append([]string{"lab", "switch"}, tt.args...), tt.want)
	}
}

func TestLabSwitchChildCell(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runLabChild(context.Background(), []string{"switch", "-workload", "chan", "-procs", "1", "-clients", "2", "-buffer", "0", "-duration", "20ms"}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), `"workload":"chan"`) || strings.Contains(stdout.String(), `"ops":0,`) {
		t.Errorf("lab-child switch: got %v, %q; want a chan cell with ops", err, stdout.String())
	}
}
