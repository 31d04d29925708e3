package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"reflect"
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
