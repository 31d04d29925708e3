package report

import (
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
)

// keepPlots, when set to a directory, keeps the test plots there for a
// person to look at: REPORT_KEEP_PLOTS=/tmp/plots go test -run Plot.
var keepPlots = os.Getenv("REPORT_KEEP_PLOTS")

func plotDir(t *testing.T) string {
	if keepPlots != "" {
		if err := os.MkdirAll(keepPlots, 0o755); err != nil {
			t.Fatal(err)
		}
		return keepPlots
	}
	return t.TempDir()
}

// checkPNG fails unless path holds a 960x576 PNG (10x6 inches at 96 dpi).
func checkPNG(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open plot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	if got := img.Bounds().Size(); got.X != 960 || got.Y != 576 {
		t.Errorf("%s size: got %dx%d, want 960x576", filepath.Base(path), got.X, got.Y)
	}
}

func TestLinePlot(t *testing.T) {
	dir := plotDir(t)
	nan := math.NaN()
	tests := []struct {
		name   string
		logY   bool
		series []Series
	}{
		{
			name: "line-linear",
			series: []Series{
				{Name: "fifo", X: []float64{1, 2, 4, 8, 16}, Y: []float64{0.2, 0.5, 3, 40, 152}},
				{Name: "eevdf", X: []float64{1, 2, 4, 8, 16}, Y: []float64{0.2, 0.3, 0.4, 0.9, 1.5}},
			},
		},
		{
			name: "line-log",
			logY: true,
			series: []Series{
				{Name: "fifo", X: []float64{1, 2, 4, 8, 16}, Y: []float64{0.2, 0.5, 3, 40, 152}},
				{Name: "eevdf", X: []float64{1, 2, 4, 8, 16}, Y: []float64{0.2, 0.3, 0.4, 0.9, 1.5}},
				{Name: "with zero and NaN", X: []float64{1, 2, 4, 8, 16}, Y: []float64{0, nan, 2, -1, 20}},
			},
		},
		{
			name:   "line-log-narrow-range",
			logY:   true,
			series: []Series{{Name: "p99", X: []float64{1, 2, 3}, Y: []float64{2.1, 2.5, 2.9}}},
		},
		{
			name:   "line-log-no-positive",
			logY:   true,
			series: []Series{{Name: "zeros", X: []float64{1, 2, 3}, Y: []float64{0, 0, -1}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".png")
			if err := LinePlot(path, "Latency vs load ("+tt.name+")", "CPU-bound goroutines", "p99 latency (ms)", tt.logY, tt.series); err != nil {
				t.Fatalf("LinePlot: %v", err)
			}
			checkPNG(t, path)
		})
	}
}

func TestBarPlot(t *testing.T) {
	dir := plotDir(t)
	tests := []struct {
		name       string
		logY       bool
		categories []string
		bars       []Bars
	}{
		{
			name:       "bar-log",
			logY:       true,
			categories: []string{"fifo", "eevdf", "eevdf+nice", "classes"},
			bars: []Bars{
				{Name: "p50", Values: []float64{0.12, 0.10, 0.09, 0.11}},
				{Name: "p99", Values: []float64{152, 1.5, 0.9, 1.2}},
				{Name: "p99.9", Values: []float64{410, 4.2, 0, math.NaN()}},
			},
		},
		{
			name:       "bar-linear-long-names",
			categories: []string{"baseline: plain goroutines", "semaphore (x/sync)", "errgroup.SetLimit", "cpusched default", "cpusched nice=-5", "cpusched batch class", "cpusched groups 3:1"},
			bars: []Bars{
				{Name: "throughput (ops/s)", Values: []float64{980, 975, 990, 940, 935, 960, 950}},
				{Name: "negative check", Values: []float64{120, -40, 0, 300, 310, 280, 290}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name+".png")
			if err := BarPlot(path, "Latency by policy ("+tt.name+")", "latency (ms)", tt.logY, tt.categories, tt.bars); err != nil {
				t.Fatalf("BarPlot: %v", err)
			}
			checkPNG(t, path)
		})
	}
}

func TestPlotErrors(t *testing.T) {
	dir := t.TempDir()
	png := filepath.Join(dir, "x.png")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"line no series", LinePlot(png, "", "", "", false, nil), "no series"},
		{"line length mismatch", LinePlot(png, "", "", "", false, []Series{{Name: "s", X: []float64{1, 2}, Y: []float64{1}}}), `series "s" has 2 X values and 1 Y values`},
		{"line nothing finite", LinePlot(png, "", "", "", false, []Series{{Name: "s", X: []float64{1}, Y: []float64{math.NaN()}}}), "no finite points"},
		{"line unknown format", LinePlot(filepath.Join(dir, "x.bmp"), "", "", "", false, []Series{{Name: "s", X: []float64{1}, Y: []float64{1}}}), "x.bmp"},
		{"bar no categories", BarPlot(png, "", "", false, nil, []Bars{{Name: "b"}}), "no categories"},
		{"bar no bars", BarPlot(png, "", "", false, []string{"a"}, nil), "no bar series"},
		{"bar length mismatch", BarPlot(png, "", "", false, []string{"a", "b"}, []Bars{{Name: "b", Values: []float64{1}}}), `series "b" has 1 values, want one per category (2)`},
		{"bar missing dir", BarPlot(filepath.Join(dir, "no", "x.png"), "", "", false, []string{"a"}, []Bars{{Name: "b", Values: []float64{1}}}), "no such file"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: got error %v, want one containing %q", tt.name, tt.err, tt.want)
		}
	}
	if _, err := os.Stat(png); !os.IsNotExist(err) {
		t.Errorf("failed plots wrote %s (stat error %v), want no file", png, err)
	}
}

func TestLogTicks(t *testing.T) {
	labels := func(ticks []plot.Tick) []string {
		var out []string
		for _, tk := range ticks {
			if tk.Label != "" {
				out = append(out, tk.Label)
			}
		}
		return out
	}
	tests := []struct {
		lo, hi float64
		want   string
	}{
		{0.01, 1000, "0.01 0.1 1 10 100 1000"},
		{0.05, 20, "0.05 0.1 0.2 0.5 1 2 5 10 20"},
		{2, 9, "2 3 4 5 6 7 8 9"},
		{2.1, 2.9, "2.2 2.4 2.6 2.8"},
		{1.5, 5.2, "2 3 4 5"},
		{1e-3, 1e18, "0.001 1 1000 1e+06 1e+09 1e+12 1e+15 1e+18"},
		{0, 10, ""},
		{5, 5, ""},
	}
	for _, tt := range tests {
		if got := strings.Join(labels(logTicks(tt.lo, tt.hi)), " "); got != tt.want {
			t.Errorf("logTicks(%v, %v) labels: got %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}

func TestLinearTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		want   string
	}{
		{0.2, 164, "20 40 60 80 100 120 140 160"},
		{1, 16, "2 4 6 8 10 12 14 16"},
		{-40, 1070, "0 200 400 600 800 1000"},
		{0.12, 0.19, "0.12 0.13 0.14 0.15 0.16 0.17 0.18 0.19"},
		{-1, 1, "-1 -0.8 -0.6 -0.4 -0.2 0 0.2 0.4 0.6 0.8 1"},
		{3, 3, ""},
	}
	for _, tt := range tests {
		var labels []string
		for _, tk := range linearTicks(tt.lo, tt.hi) {
			if tk.Label != "" {
				labels = append(labels, tk.Label)
			}
		}
		if got := strings.Join(labels, " "); got != tt.want {
			t.Errorf("linearTicks(%v, %v) labels: got %q, want %q", tt.lo, tt.hi, got, tt.want)
		}
	}
}
