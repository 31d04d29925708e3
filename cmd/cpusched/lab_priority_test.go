package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLabPriorityUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-policies", ""}, "-policies: empty list (valid: normal,nice-20,batch,idle,rr99)"},
		{[]string{"-policies", "fifo"}, `-policies: unknown policy "fifo"`},
		{[]string{"-sleeps", "-1"}, "-sleeps: -1 out of range (valid: 0..20000)"},
		{[]string{"-target", "1h"}, "-target: 1h0m0s out of range"},
		{[]string{"-chunk", "0"}, "-chunk: must be at least 1"},
		{[]string{"-loops", "-3"}, "invalid value"},
		{[]string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tt := range tests {
		checkUsageError(t, append([]string{"lab", "priority"}, tt.args...), tt.want)
	}
}

func TestLabPriorityChildTasks(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runLabChild(context.Background(), []string{"priority", "-mode", "tasks", "-loops", "100000", "-chunk", "10000"}, &stdout, &stderr)
	if err != nil || !strings.Contains(stdout.String(), `"name":"ClassRealtime"`) {
		t.Errorf("lab-child priority -mode tasks: got %v, %q; want three task rows", err, stdout.String())
	}
	stdout.Reset()
	err = runLabChild(context.Background(), []string{"priority", "-mode", "bogus"}, &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "-mode") {
		t.Errorf("lab-child priority -mode bogus: got %v, want an error naming -mode", err)
	}
}
