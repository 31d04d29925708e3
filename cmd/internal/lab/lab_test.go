package lab

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/cpusched/cpusched/cmd/internal/cli"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRun measures nothing: -n is how many rows it reports, -fail the error
// it stops with.
type fakeRun struct {
	n     *int
	fail  *string
	quick bool
	given bool
}

func (r *fakeRun) Flags(fs *flag.FlagSet) {
	r.n = fs.Int("n", 1, "rows (0..9)")
	r.fail = fs.String("fail", "", "stop with this error")
}

func (r *fakeRun) Setup(s Setup) error {
	if *r.n < 0 || *r.n > 9 {
		return fmt.Errorf("-n must be in 0..9, got %d", *r.n)
	}
	if s.Child == nil {
		return errors.New("no child command")
	}
	r.quick, r.given = s.Quick, s.Given("n")
	return nil
}

func (r *fakeRun) Measure(ctx context.Context, progress func(string, ...any)) (*Report, error) {
	progress("measuring %d rows", *r.n)
	var err error
	if *r.fail != "" {
		err = errors.New(*r.fail)
	}
	if *r.n == 0 {
		return nil, err
	}
	doc := map[string]any{"rows": *r.n, "quick": r.quick, "n_given": r.given}
	return &Report{
		JSON:  doc,
		Table: func(w io.Writer) error { _, err := fmt.Fprintf(w, "table: %d rows\n", *r.n); return err },
		Plots: func(dir string) ([]string, error) {
			p := filepath.Join(dir, "fake.png")
			return []string{p}, os.WriteFile(p, []byte("png"), 0o644)
		},
	}, err
}

func fakeTable() []Experiment {
	return []Experiment{{
		Name: "fake", Summary: "a fake experiment", QuickHelp: "quick", OutHelp: "out",
		New: func() Run { return &fakeRun{} },
		Child: func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			_, err := fmt.Fprintf(stdout, "child %q\n", args)
			return err
		},
	}}
}

func TestMainCommandLine(t *testing.T) {
	out := t.TempDir()
	tests := []struct {
		args       []string
		wantErr    string // "" for none
		wantUsage  bool   // the error is a *cli.UsageError
		wantStdout string
		wantStderr string
	}{
		{nil, "missing experiment name (valid: fake)", true, "", "fake      a fake experiment"},
		{[]string{"-h"}, "", false, "", "usage: cpusched lab NAME"},
		{[]string{"nope"}, `unknown experiment "nope" (valid: fake)`, true, "", ""},
		{[]string{"fake", "-h"}, flag.ErrHelp.Error(), false, "", "-quick"},
		{[]string{"fake", "-nope"}, "flag provided but not defined: -nope", true, "", ""},
		{[]string{"fake", "x"}, `fake: unexpected argument "x" (lab fake takes only flags)`, true, "", ""},
		{[]string{"fake", "-n", "10"}, "-n must be in 0..9, got 10", true, "", ""},
		{[]string{"fake", "-n", "2"}, "", false, "table: 2 rows\n", ""},
		{[]string{"fake", "-quick", "-json", "-"}, "", false, `"quick": true`, ""},
		{[]string{"fake", "-n", "3", "-json", "-"}, "", false, `"n_given": true`, ""},
		{[]string{"fake", "-out", out}, "", false, "wrote " + filepath.Join(out, "fake.json") + " and " + filepath.Join(out, "fake.png"), ""},
		{[]string{"fake", "-json", filepath.Join(out, "no", "r.json")}, "-json " + filepath.Join(out, "no", "r.json") + ": cannot be written, so the results would be lost at the end of the run: no such file or directory", true, "", ""},
		{[]string{"fake", "-out", filepath.Join(out, "fake.json", "sub")}, "-out " + filepath.Join(out, "fake.json", "sub") + ": cannot be made, so the results would be lost at the end of the run: not a directory", true, "", ""},
		{[]string{"fake", "-n", "0", "-fail", "child died"}, "child died", false, "", ""},
		{[]string{"fake", "-fail", "child died"}, "child died", false, "table: 1 rows", "lab fake: stopped early (child died)"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		err := Main(context.Background(), fakeTable(), tt.args, &stdout, &stderr)
		var ue *cli.UsageError
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Main(%q): got error %v, want none", tt.args, err)
		case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
			t.Errorf("Main(%q): got error %v, want %q", tt.args, err, tt.wantErr)
		case err != nil && errors.As(err, &ue) != tt.wantUsage:
			t.Errorf("Main(%q): got error %#v, want a usage error: %v", tt.args, err, tt.wantUsage)
		}
		if !strings.Contains(stdout.String(), tt.wantStdout) || tt.wantStdout == "" && stdout.Len() > 0 {
			t.Errorf("Main(%q): got stdout %q, want %q", tt.args, stdout.String(), tt.wantStdout)
		}
		if !strings.Contains(stderr.String(), tt.wantStderr) {
			t.Errorf("Main(%q): got stderr %q, want it to contain %q", tt.args, stderr.String(), tt.wantStderr)
		}
	}
	if b, err := os.ReadFile(filepath.Join(out, "fake.json")); err != nil || !strings.Contains(string(b), `"rows": 1`) {
		t.Errorf("-out: got fake.json %q, %v; want the JSON document", b, err)
	}
}

func TestChildMain(t *testing.T) {
	tests := []struct {
		args       []string
		wantErr    string
		wantStdout string
	}{
		{nil, "lab-child: missing experiment name", ""},
		{[]string{"nope"}, `lab-child: no child workload for "nope"`, ""},
		{[]string{"fake", "-a", "1"}, "", `child ["-a" "1"]` + "\n"},
	}
	for _, tt := range tests {
		var stdout bytes.Buffer
		err := ChildMain(context.Background(), fakeTable(), tt.args, &stdout, io.Discard)
		var ue *cli.UsageError
		if tt.wantErr != "" && (!errors.As(err, &ue) || err.Error() != tt.wantErr) || tt.wantErr == "" && err != nil {
			t.Errorf("ChildMain(%q): got error %v, want usage error %q", tt.args, err, tt.wantErr)
		}
		if stdout.String() != tt.wantStdout {
			t.Errorf("ChildMain(%q): got stdout %q, want %q", tt.args, stdout.String(), tt.wantStdout)
		}
	}
}
