package cpusched

import (
	"strconv"
	"strings"
	"testing"
)

// checkParsed checks the contract of a Parse function on input s: it
// returned v and err without panicking (the fuzzer reports a panic); on
// success v's name is s and parses back to v; on failure the error quotes s
// and lists every valid name.
// parsedName is a parsed value: comparable, with a String that names it.
type parsedName interface {
	comparable
	String() string
}

func checkParsed[T parsedName](t *testing.T, parse func(string) (T, error), s string, v T, err error, valid []T) {
	t.Helper()
	if err == nil {
		if v.String() != s {
			t.Fatalf("parse(%q) = %v, whose String is %q", s, v, v.String())
		}
		back, err := parse(v.String())
		if err != nil || back != v {
			t.Fatalf("parse(%q) = %v, %v; want %v (round trip)", v.String(), back, err, v)
		}
		return
	}
	msg := err.Error()
	if !strings.Contains(msg, strconv.Quote(s)) {
		t.Errorf("parse(%q): error %q does not quote the input", s, msg)
	}
	for _, ok := range valid {
		if !strings.Contains(msg, ok.String()) {
			t.Errorf("parse(%q): error %q does not list the valid value %q", s, msg, ok.String())
		}
	}
}

func allClasses() []Class {
	var cs []Class
	for c := ClassNormal; c <= ClassIdle; c++ {
		cs = append(cs, c)
	}
	return cs
}

// FuzzParseIsolation: ParseIsolation never panics, accepts exactly the
// names of IsolationModes (String round-trips), and rejects anything else
// with an error that quotes the input and lists the valid modes.
func FuzzParseIsolation(f *testing.F) {
	for _, s := range []string{"reserve", "none", "ospriority", "", "Reserve", " none", "none\x00", "Isolation(3)", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseIsolation(s)
		checkParsed(t, ParseIsolation, s, m, err, IsolationModes())
		if err == nil && !m.valid() {
			t.Fatalf("ParseIsolation(%q) = %v, which WithIsolation refuses", s, m)
		}
	})
}

// FuzzParseClass: ParseClass never panics, accepts exactly the four class
// names (String round-trips), and rejects anything else with an error that
// quotes the input and lists the valid classes.
func FuzzParseClass(f *testing.F) {
	for _, s := range []string{"normal", "realtime", "batch", "idle", "", "IDLE", "Class(4)", "normal\n", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseClass(s)
		checkParsed(t, ParseClass, s, c, err, allClasses())
		if err == nil && CheckTaskOptions(WithClass(c)) != nil {
			t.Fatalf("ParseClass(%q) = %v, which WithClass refuses", s, c)
		}
	})
}
