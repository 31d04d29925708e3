package demo

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"testing"
)

// TestParseGroups: serve's -groups, good and bad, side by side.
func TestParseGroups(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]int
		wantErr string
	}{
		{in: "", want: nil},
		{in: "a=300,b=100", want: map[string]int{"a": 300, "b": 100}},
		{in: " a=1 , b=10000 ", want: map[string]int{"a": 1, "b": 10000}},
		{in: "a", wantErr: `"a": want NAME=WEIGHT, the weight an integer in 1..10000`},
		{in: "a=x", wantErr: "want NAME=WEIGHT"},
		{in: "a=0", wantErr: `group "a": the weight must be in 1..10000, got 0`},
		{in: "a=10001", wantErr: "1..10000, got 10001"},
		{in: "=5", wantErr: "a name must be non-empty"},
		{in: "a=1,a=2", wantErr: `group "a" given twice`},
		{in: strings.Repeat("g", MaxGroupLen+1) + "=1", wantErr: "at most 256 bytes, got 257"},
	}
	for _, tt := range tests {
		got, err := ParseGroups(tt.in)
		switch {
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseGroups(%q): got error %v, want one containing %q", tt.in, err, tt.wantErr)
		case tt.wantErr == "" && err != nil:
			t.Errorf("ParseGroups(%q): got error %v, want %v", tt.in, err, tt.want)
		case tt.wantErr == "" && !maps.Equal(got, tt.want):
			t.Errorf("ParseGroups(%q): got %v, want %v", tt.in, got, tt.want)
		case tt.wantErr == "" && got != nil:
			if back, err := ParseGroups(FormatGroups(got)); err != nil || !maps.Equal(back, got) {
				t.Errorf("ParseGroups(FormatGroups(%v)) = %v, %v: want the same groups", got, back, err)
			}
		}
	}
}

// TestGroupsWeightsAndPasses: Config.Groups reaches the scheduler's
// weights, and each named group's passes are counted apart, other groups'
// not at all.
func TestGroupsWeightsAndPasses(t *testing.T) {
	_, hs := newTestServer(t, Config{Workers: 1, Groups: map[string]int{"gold": 300, "free": 25}})
	for _, path := range []string{"/checksum?n=3&sched=1&group=gold", "/checksum?n=4&sched=1&group=gold&checkpoint=0",
		"/checksum?n=5&sched=1&group=free", "/checksum?n=6&sched=1&group=other", "/checksum?n=7&group=gold"} {
		if code, _, body := get(t, "GET", hs.URL+path); code != http.StatusOK {
			t.Fatalf("%s: got %d %s", path, code, body)
		}
	}
	_, _, body := get(t, "GET", hs.URL+"/stats")
	var st Stats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	// The direct request (no sched=1) runs no task: its group is not used.
	if want := map[string]uint64{"gold": 3 + 4, "free": 5}; !maps.Equal(st.PassesByGroup, want) {
		t.Errorf("passes_by_group: got %v, want %v", st.PassesByGroup, want)
	}
	for name, w := range map[string]int{"gold": 300, "free": 25} {
		if g := st.Scheduler.Groups[name]; g.Weight != w || g.Ended == 0 {
			t.Errorf("scheduler.groups[%q]: got %+v, want weight %d and its tasks ended", name, g, w)
		}
	}
}

// TestNewServerGroupErrors: a bad Config.Groups is an error naming the
// group and the range, and starts nothing.
func TestNewServerGroupErrors(t *testing.T) {
	for groups, want := range map[string]string{"a=0": `group "a": the weight must be in 1..10000`, "=1": "non-empty"} {
		name, w, _ := strings.Cut(groups, "=")
		cfg := Config{Groups: map[string]int{name: map[string]int{"0": 0, "1": 1}[w]}}
		s, err := NewServer(cfg)
		if err == nil {
			s.Close(context.Background())
			t.Errorf("NewServer(Groups %v): got nil error, want %q", cfg.Groups, want)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("NewServer(Groups %v): got %q, want it to contain %q", cfg.Groups, err, want)
		}
	}
}
