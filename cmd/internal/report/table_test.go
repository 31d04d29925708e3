package report

import (
	"errors"
	"strings"
	"testing"
)

func TestTableWrite(t *testing.T) {
	tests := []struct {
		name   string
		header []string
		rows   [][]string
		want   string
	}{
		{
			name:   "numbers right, text left",
			header: []string{"policy", "p50 ms", "p99 ms", "busy"},
			rows: [][]string{
				{"fifo", "0.123", "1,234", "95%"},
				{"eevdf-nice", "1.50", "152", "100%"},
			},
			want: "" +
				"policy      p50 ms  p99 ms  busy\n" +
				"----------  ------  ------  ----\n" +
				"fifo         0.123   1,234   95%\n" +
				"eevdf-nice    1.50     152  100%\n",
		},
		{
			name:   "dash counts as a number, short rows padded",
			header: []string{"name", "value", "note"},
			rows: [][]string{
				{"a", "-", "no data"},
				{"bb", "12"},
				{"c"},
			},
			want: "" +
				"name  value  note\n" +
				"----  -----  -------\n" +
				"a         -  no data\n" +
				"bb       12\n" +
				"c\n",
		},
		{
			name:   "mixed column stays left-aligned",
			header: []string{"k", "v"},
			rows: [][]string{
				{"x", "10"},
				{"y", "n/a"},
			},
			want: "" +
				"k  v\n" +
				"-  ---\n" +
				"x  10\n" +
				"y  n/a\n",
		},
		{
			name:   "column of only dashes is text",
			header: []string{"name", "x"},
			rows:   [][]string{{"alpha", "-"}},
			want: "" +
				"name   x\n" +
				"-----  -\n" +
				"alpha  -\n",
		},
		{
			name:   "wide runes and extra cells",
			header: []string{"µs", "n"},
			rows:   [][]string{{"ünïcode", "-3.5", "extra"}},
			want: "" +
				"µs          n\n" +
				"-------  ----  -----\n" +
				"ünïcode  -3.5  extra\n",
		},
		{
			name:   "header only",
			header: []string{"a", "bb"},
			want:   "a  bb\n-  --\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := NewTable(tt.header...)
			for _, r := range tt.rows {
				tab.Row(r...)
			}
			var b strings.Builder
			if err := tab.Write(&b); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if got := b.String(); got != tt.want {
				t.Errorf("Write:\ngot\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

type failingWriter struct{}

var errWrite = errors.New("disk full")

func (failingWriter) Write([]byte) (int, error) { return 0, errWrite }

func TestTableWriteError(t *testing.T) {
	tab := NewTable("a")
	tab.Row("1")
	if err := tab.Write(failingWriter{}); !errors.Is(err, errWrite) {
		t.Errorf("Write to a failing writer: got %v, want %v", err, errWrite)
	}
}

func TestIsNumber(t *testing.T) {
	tests := []struct {
		in   string
		want bool
	}{
		{"0.123", true}, {"1,234", true}, {"-3.5", true}, {"95%", true}, {"-", true},
		{"1.5x", true}, {"+2", true}, {"1e6", true},
		{"", false}, {"abc", false}, {"12 ms", false}, {"--", false}, {"%", false},
	}
	for _, tt := range tests {
		if got := isNumber(tt.in); got != tt.want {
			t.Errorf("isNumber(%q): got %v, want %v", tt.in, got, tt.want)
		}
	}
}
