package main

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain makes the test binary safe to re-execute: a subcommand that
// starts os.Executable() as a child (bench, lab) would otherwise start this
// test binary, which would run every test again, recursively. Called with a
// command instead of -test flags, it behaves as the cpusched binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
		os.Exit(dispatch(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func TestDispatch(t *testing.T) {
	var out, errOut strings.Builder
	for _, tt := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"help"}, 0},
		{[]string{"nope"}, 2},
		{[]string{"lab"}, 2},
		{[]string{"lab", "nope"}, 2},
		{[]string{"lab-child"}, 2},
		{[]string{"idle-hog", "-c", "0"}, 2},
	} {
		if got := dispatch(context.Background(), tt.args, &out, &errOut); got != tt.want {
			t.Errorf("dispatch(%q) = %d, want %d", tt.args, got, tt.want)
		}
	}
	if !strings.Contains(errOut.String(), "bench") || strings.Contains(errOut.String(), "lab-child ") || strings.Contains(errOut.String(), "idle-hog ") {
		t.Errorf("usage lists: %q, want bench listed and the internal lab-child and idle-hog hidden", errOut.String())
	}
}

// checkUsageError runs cpusched with args and checks the usage-error
// contract: exit status 2, wantErr on stderr, nothing on stdout.
func checkUsageError(t *testing.T, args []string, wantErr string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := dispatch(context.Background(), args, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), wantErr) {
		t.Errorf("cpusched %q: got exit %d, stderr %q; want exit 2 and stderr containing %q", args, code, stderr.String(), wantErr)
	}
	if stdout.Len() != 0 {
		t.Errorf("cpusched %q: got stdout %q, want nothing", args, stdout.String())
	}
}

// TestPackageCommentListsCommands keeps the command's go doc in step with
// the command table: each command people run has a line in the comment's
// list, and each internal one is named in its sentence.
func TestPackageCommentListsCommands(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	for _, c := range commands {
		pattern := `(?m)^\t` + regexp.QuoteMeta(c.name) + ` `
		if strings.HasPrefix(c.summary, "(internal)") {
			pattern = `\b` + regexp.QuoteMeta(c.name) + `,`
		}
		if !regexp.MustCompile(pattern).MatchString(doc) {
			t.Errorf("the package comment does not list command %q (no match for %s)", c.name, pattern)
		}
	}
}
