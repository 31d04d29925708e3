package report

import (
	"os"
	"strings"
	"testing"
)

func TestProgressForced(t *testing.T) {
	tests := []struct {
		name string
		do   func(p *Progress)
		want string
	}{
		{
			name: "set twice then done",
			do: func(p *Progress) {
				p.Set("run %d/%d", 1, 3)
				p.Set("run %d/%d", 2, 3)
				p.Done()
			},
			want: "\rrun 1/3\x1b[K\rrun 2/3\x1b[K\r\x1b[K",
		},
		{
			name: "done without set writes nothing",
			do:   func(p *Progress) { p.Done() },
			want: "",
		},
		{
			name: "done twice clears once",
			do: func(p *Progress) {
				p.Set("x")
				p.Done()
				p.Done()
			},
			want: "\rx\x1b[K\r\x1b[K",
		},
		{
			name: "line breaks become spaces",
			do:   func(p *Progress) { p.Set("a\nb\rc") },
			want: "\ra b c\x1b[K",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			tt.do(ForceProgress(&b))
			if got := b.String(); got != tt.want {
				t.Errorf("output: got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestProgressTruncatesToWidth(t *testing.T) {
	var b strings.Builder
	p := ForceProgress(&b)
	p.width = 6
	p.Set("ünïcode line")
	if got, want := b.String(), "\rünïco\x1b[K"; got != want {
		t.Errorf("output: got %q, want %q", got, want)
	}
}

func TestProgressDisabled(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "progress")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	for _, p := range []*Progress{NewProgress(&b), NewProgress(f), nil} {
		p.Set("working %d", 1)
		p.Done()
	}
	if b.Len() != 0 {
		t.Errorf("buffer: got %q, want nothing", b.String())
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 0 {
		t.Errorf("regular file: got size %d, want 0", st.Size())
	}
}
