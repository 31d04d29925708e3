package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestParseAndGiven(t *testing.T) {
	tests := []struct {
		args      []string
		wantGiven bool
		wantErr   string // "" for none
	}{
		{nil, false, ""},
		{[]string{"-n", "5"}, true, ""},
		{[]string{"-n", "0"}, true, ""}, // the default value, but given
		{[]string{"-nope"}, false, "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		fs := NewFlagSet("test", io.Discard)
		fs.Int("n", 0, "count")
		err := Parse(fs, tt.args)
		var ue *UsageError
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("Parse(%q): got %v, want no error", tt.args, err)
		case tt.wantErr != "" && (!errors.As(err, &ue) || ue.Msg != tt.wantErr):
			t.Errorf("Parse(%q): got %#v, want *UsageError %q", tt.args, err, tt.wantErr)
		}
		if got := Given(fs, "n"); got != tt.wantGiven {
			t.Errorf("Given(%q, n): got %v, want %v", tt.args, got, tt.wantGiven)
		}
	}
	fs := NewFlagSet("test", io.Discard)
	if err := Parse(fs, []string{"-h"}); err != flag.ErrHelp {
		t.Errorf("Parse(-h): got %v, want flag.ErrHelp", err)
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{" , ,", nil},
		{"a", []string{"a"}},
		{"a, b,,c ", []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		if got := SplitList(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("SplitList(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckChoices(t *testing.T) {
	valid := []string{"gzip", "bcrypt"}
	for _, tt := range []struct {
		items []string
		want  string // "" for no error
	}{
		{[]string{"bcrypt"}, ""},
		{[]string{"gzip", "bcrypt"}, ""},
		{nil, "-kinds must not be empty (valid: gzip, bcrypt)"},
		{[]string{"gzip", "zstd"}, `-kinds: unknown kind "zstd" (valid: gzip, bcrypt)`},
		{[]string{"gzip", "bcrypt", "gzip"}, `-kinds: "gzip" is listed twice`},
	} {
		err := CheckChoices("kinds", "kind", tt.items, valid)
		if got := fmt.Sprint(err); (tt.want == "" && err != nil) || (tt.want != "" && got != tt.want) {
			t.Errorf("CheckChoices(%q): got %v, want %q", tt.items, err, tt.want)
		}
	}
}

func TestCheckOutputFile(t *testing.T) {
	dir := t.TempDir()
	kept := filepath.Join(dir, "kept.json")
	if err := os.WriteFile(kept, []byte("earlier run"), 0o644); err != nil {
		t.Fatal(err)
	}
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.json")
	tests := []struct {
		path    string
		wantErr string // "" for none
	}{
		{"", ""},
		{"-", ""},
		{fresh, ""},
		{kept, ""},
		{filepath.Join(dir, "no", "such", "dir", "r.json"), "-json " + filepath.Join(dir, "no", "such", "dir", "r.json") + ": cannot be written, so the results would be lost at the end of the run: no such file or directory"},
		{filepath.Join(notDir, "r.json"), "cannot be written"},
		{dir, "is a directory"},
	}
	for _, tt := range tests {
		err := CheckOutputFile("json", tt.path)
		checkUsageErr(t, fmt.Sprintf("CheckOutputFile(%q)", tt.path), err, tt.wantErr)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("CheckOutputFile left %s behind (stat: %v)", fresh, err)
	}
	if b, err := os.ReadFile(kept); err != nil || string(b) != "earlier run" {
		t.Errorf("CheckOutputFile changed an existing file: %q, %v", b, err)
	}
}

func TestCheckOutputDir(t *testing.T) {
	dir := t.TempDir()
	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	made := filepath.Join(dir, "a", "b")
	tests := []struct {
		dir     string
		wantErr string
	}{
		{"", ""},
		{made, ""},
		{dir, ""},
		{notDir, "-out " + notDir + ": cannot be made"},
		{filepath.Join(notDir, "sub"), "cannot be made"},
	}
	for _, tt := range tests {
		err := CheckOutputDir("out", tt.dir)
		checkUsageErr(t, fmt.Sprintf("CheckOutputDir(%q)", tt.dir), err, tt.wantErr)
	}
	entries, err := os.ReadDir(made)
	if err != nil || len(entries) != 0 {
		t.Errorf("CheckOutputDir(%q): want an empty directory made, got %v, %v", made, entries, err)
	}
}

// checkUsageErr fails t unless err is nil where want is "", or a
// *UsageError whose message contains want.
func checkUsageErr(t *testing.T, call string, err error, want string) {
	t.Helper()
	var ue *UsageError
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: got %v, want no error", call, err)
	case want != "" && err == nil:
		t.Errorf("%s: got no error, want one containing %q", call, want)
	case want != "" && !errors.As(err, &ue):
		t.Errorf("%s: got %T %v, want a *UsageError", call, err, err)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Errorf("%s: got %q, want it to contain %q", call, err, want)
	}
}
