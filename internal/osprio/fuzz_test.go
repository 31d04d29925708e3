package osprio

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzParsePolicy: ParsePolicy never panics, accepts exactly the names of
// the measured policies (a policy's Name parses back to it), and rejects
// anything else with an error that quotes the input and lists every valid
// name.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"idle", "batch10", "nice19", "nice10", "", "nice5", "Idle", "batch", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		if err == nil {
			if p.Name != s {
				t.Fatalf("ParsePolicy(%q) = %+v, named %q", s, p, p.Name)
			}
			if back, err := ParsePolicy(p.Name); err != nil || back != p {
				t.Fatalf("ParsePolicy(%q) = %+v, %v; want %+v (round trip)", p.Name, back, err, p)
			}
			return
		}
		if p != (Policy{}) {
			t.Errorf("ParsePolicy(%q) failed but returned %+v, want the zero Policy", s, p)
		}
		msg := err.Error()
		if !strings.Contains(msg, strconv.Quote(s)) {
			t.Errorf("ParsePolicy(%q): error %q does not quote the input", s, msg)
		}
		for _, valid := range all {
			if !strings.Contains(msg, valid.Name) {
				t.Errorf("ParsePolicy(%q): error %q does not list %q", s, msg, valid.Name)
			}
		}
	})
}
