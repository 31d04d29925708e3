package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the job briefly and checks the table's structure: one row
// per tenant, shares that add up to 100%. The shares themselves depend on
// the machine's load, so they are not checked against the weights.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-d", "300ms", "-tasks", "200"}, &out); err != nil {
		t.Fatalf("run: got %v, want nil", err)
	}
	t.Logf("output:\n%s", out.String())

	rows := make(map[string][]string)
	for line := range strings.Lines(out.String()) {
		fields := strings.Fields(line)
		if len(fields) == 7 {
			rows[fields[0]] = fields
		}
	}
	var sum float64
	for _, tn := range tenants {
		row, ok := rows[tn.name]
		if !ok {
			t.Errorf("tenant %s: no row", tn.name)
			continue
		}
		if got, want := row[1], strconv.Itoa(tn.weight); got != want {
			t.Errorf("tenant %s weight: got %s, want %s", tn.name, got, want)
		}
		share, err := strconv.ParseFloat(strings.TrimSuffix(row[4], "%"), 64)
		if err != nil {
			t.Errorf("tenant %s share: got %q, want a percentage", tn.name, row[4])
		}
		sum += share
	}
	if sum < 99.8 || sum > 100.2 {
		t.Errorf("shares: got a sum of %.1f%%, want 100%% (each rounded to 0.1)", sum)
	}
}

func TestRunFlagErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string // in the error
	}{
		{[]string{"-d", "0"}, "-d must be in 10ms..1h0m0s, got 0s"},
		{[]string{"-d", "2h"}, "-d must be in 10ms..1h0m0s, got 2h0m0s"},
		{[]string{"-tasks", "0"}, "-tasks must be in 1..100000, got 0"},
		{[]string{"-tasks", "100001"}, "-tasks must be in 1..100000, got 100001"},
		{[]string{"extra"}, `takes no arguments, got ["extra"]`},
		{[]string{"-tasks", "many"}, `invalid value "many" for flag -tasks`},
	}
	for _, tc := range tests {
		var out bytes.Buffer
		err := run(context.Background(), tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q): got error %v, want one containing %q", tc.args, err, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("run(%q): wrote %q to stdout, want nothing", tc.args, out.String())
		}
	}
}
