package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The size of every plot: 960x576 pixels as PNG (96 dpi).
const (
	plotWidth  = 10 * vg.Inch
	plotHeight = 6 * vg.Inch
)

// legendMargin is the space on each side of the legend, which sits to the
// right of the plot area so that it never covers data.
const legendMargin = 10 // points

// barGroupWidth is the fraction of a category's slot that its bars fill;
// the rest is the gap between categories.
const barGroupWidth = 0.8

// maxBarValueLabels is the most bars that get their value written above
// them; with more the numbers collide.
const maxBarValueLabels = 24

// Series is one line of a LinePlot: points (X[i], Y[i]) named Name in the
// legend. X and Y must have the same length.
type Series struct {
	Name string
	X, Y []float64
}

// Bars is one series of a BarPlot: Values[i] is its bar in categories[i].
type Bars struct {
	Name   string
	Values []float64
}

// LinePlot draws each series as a line with a marker at every point, in
// its own colour and marker shape, and writes the plot to path in the
// format its extension names (.png, .svg, .pdf, ...) at 10x6 inches. The
// legend is to the right of the plot area. Points with a NaN or infinite
// coordinate are left out; with logY so are points with Y <= 0, and if no
// point has Y > 0 the Y axis stays linear. It fails, writing nothing, if
// there are no series, a series has len(X) != len(Y), no point is left to
// draw, or the format is unknown; a failed write may leave a partial file.
func LinePlot(path, title, xLabel, yLabel string, logY bool, series []Series) error {
	return xyPlot(path, title, xLabel, yLabel, logY, true, series)
}

// ScatterPlot is LinePlot without the lines: each series' points are
// marks only, for points that are separate runs rather than a curve.
func ScatterPlot(path, title, xLabel, yLabel string, logY bool, series []Series) error {
	return xyPlot(path, title, xLabel, yLabel, logY, false, series)
}

// xyPlot is LinePlot, and with lines false ScatterPlot.
func xyPlot(path, title, xLabel, yLabel string, logY, lines bool, series []Series) error {
	if len(series) == 0 {
		return fmt.Errorf("report: line plot %s: no series", path)
	}
	anyPositive, anyPoint := false, false
	clean := make([]plotter.XYs, len(series))
	for i, s := range series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("report: line plot %s: series %q has %d X values and %d Y values, want equal", path, s.Name, len(s.X), len(s.Y))
		}
		for j := range s.X {
			x, y := s.X[j], s.Y[j]
			if !finite(x) || !finite(y) {
				continue
			}
			clean[i] = append(clean[i], plotter.XY{X: x, Y: y})
			anyPositive = anyPositive || y > 0
			anyPoint = true
		}
	}
	if !anyPoint {
		return fmt.Errorf("report: line plot %s: no finite points to draw", path)
	}
	useLog := logY && anyPositive

	p := newPlot(title, xLabel, yLabel)
	legend := plot.NewLegend()
	for i, s := range series {
		pts := clean[i]
		if useLog {
			pts = positiveY(pts)
		}
		colour := plotutil.DarkColors[i%len(plotutil.DarkColors)]
		line := &plotter.Line{XYs: pts, LineStyle: draw.LineStyle{Color: colour, Width: vg.Points(1.5)}}
		marks := &plotter.Scatter{XYs: pts, GlyphStyle: draw.GlyphStyle{Color: colour, Radius: vg.Points(3), Shape: plotutil.Shape(i)}}
		switch {
		case len(pts) == 0:
		case lines:
			p.Add(line, marks)
		default:
			p.Add(marks)
		}
		if lines {
			legend.Add(s.Name, line, marks)
		} else {
			legend.Add(s.Name, marks)
		}
	}
	if useLog {
		setLogY(p)
	}
	addHeadroom(p, useLog)
	return save(p, legend, path)
}

// BarPlot draws a grouped bar chart: for each category, one bar per
// element of bars side by side, coloured by series, with the category
// names under the groups (slanted when they would not fit side by side)
// and, for up to 24 bars, each bar's value (formatted by Ms) above it. It
// writes to path like LinePlot. NaN values draw no bar. With logY the bars
// rise from a power of ten at least 3 times below the smallest positive
// value, bars with values <= 0 are not drawn, and if no value is positive
// the Y axis stays linear. It fails, writing nothing, if categories or
// bars is empty, a Values has a length other than len(categories), or the
// format is unknown.
func BarPlot(path, title, yLabel string, logY bool, categories []string, bars []Bars) error {
	if len(categories) == 0 {
		return fmt.Errorf("report: bar plot %s: no categories", path)
	}
	if len(bars) == 0 {
		return fmt.Errorf("report: bar plot %s: no bar series", path)
	}
	minPositive := math.Inf(1)
	for _, b := range bars {
		if len(b.Values) != len(categories) {
			return fmt.Errorf("report: bar plot %s: series %q has %d values, want one per category (%d)", path, b.Name, len(b.Values), len(categories))
		}
		for _, v := range b.Values {
			if v > 0 && !math.IsInf(v, 1) {
				minPositive = min(minPositive, v)
			}
		}
	}
	useLog := logY && !math.IsInf(minPositive, 1)
	base := 0.0
	if useLog {
		// A decade boundary at least 3x below the smallest bar, so that bar
		// is at least half a decade tall.
		base = math.Pow(10, math.Floor(math.Log10(minPositive/3)))
	}

	p := newPlot(title, "", yLabel)
	legend := plot.NewLegend()
	width := barGroupWidth / float64(len(bars))
	labelValues := len(bars)*len(categories) <= maxBarValueLabels
	for j, b := range bars {
		series := &barSeries{
			values:      b.Values,
			base:        base,
			left:        -barGroupWidth/2 + float64(j)*width,
			width:       width,
			fill:        plotutil.Color(j),
			outline:     draw.LineStyle{Color: color.Gray{Y: 60}, Width: vg.Points(0.5)},
			labelValues: labelValues,
		}
		p.Add(series)
		legend.Add(b.Name, series)
	}

	ticks := make([]plot.Tick, len(categories))
	for i, name := range categories {
		ticks[i] = plot.Tick{Value: float64(i), Label: name}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Min, p.X.Max = -0.5, float64(len(categories))-0.5
	// Slant the names when the widest would crowd its neighbours; the
	// slot estimate leaves about 2 inches for the Y axis and the legend.
	slot := (plotWidth - 2*vg.Inch) / vg.Length(len(categories))
	for _, name := range categories {
		if p.X.Tick.Label.Width(name) > 0.9*slot {
			p.X.Tick.Label.Rotation = math.Pi / 6
			p.X.Tick.Label.XAlign = text.XRight
			p.X.Tick.Label.YAlign = text.YTop
			p.Add(categoryLabelRoom{})
			break
		}
	}
	if useLog {
		setLogY(p)
		p.Y.Min = base
	}
	addHeadroom(p, useLog)
	return save(p, legend, path)
}

// newPlot returns a plot with the title, axis labels, fonts sized for a
// 10x6 inch image, and a light grid behind the data.
func newPlot(title, xLabel, yLabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(16)
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font.Size = vg.Points(13)
		a.Tick.Label.Font.Size = vg.Points(11)
	}
	p.X.Tick.Marker = plot.TickerFunc(linearTicks)
	p.Y.Tick.Marker = plot.TickerFunc(linearTicks)
	grid := plotter.NewGrid()
	grid.Vertical.Color = nil
	grid.Horizontal.Color = color.Gray{Y: 210}
	p.Add(grid)
	return p
}

// setLogY makes the Y axis logarithmic with readable labels.
func setLogY(p *plot.Plot) {
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.TickerFunc(logTicks)
	if p.Y.Label.Text != "" {
		p.Y.Label.Text += " (log scale)"
	} else {
		p.Y.Label.Text = "log scale"
	}
}

// addHeadroom raises the top of the Y axis a little above the highest
// point, so the top marker or value label is not cut by the frame.
func addHeadroom(p *plot.Plot, logY bool) {
	if math.IsInf(p.Y.Max, 0) || math.IsInf(p.Y.Min, 0) {
		return
	}
	if logY {
		p.Y.Max *= math.Pow(p.Y.Max/p.Y.Min, 0.08)
		return
	}
	if p.Y.Max > p.Y.Min {
		p.Y.Max += 0.08 * (p.Y.Max - p.Y.Min)
	}
}

// save draws p with legend to its right and writes it to path.
func save(p *plot.Plot, legend plot.Legend, path string) error {
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	canvas, err := draw.NewFormattedCanvas(plotWidth, plotHeight, format)
	if err != nil {
		return fmt.Errorf("report: plot %s: %w", path, err)
	}
	whole := draw.New(canvas)
	whole.FillPolygon(color.White, []vg.Point{
		whole.Min, {X: whole.Max.X, Y: whole.Min.Y}, whole.Max, {X: whole.Min.X, Y: whole.Max.Y},
	})

	titleHeight := vg.Length(0)
	if p.Title.Text != "" {
		titleHeight = p.Title.TextStyle.Height(p.Title.Text) + p.Title.Padding
	}

	// The Y label is drawn here rather than by plot.Plot, which reserves
	// room for it at the arithmetic middle of the Y range: on a log axis
	// that is near the top, and the data area shrank to make room.
	yLabel, yStyle := p.Y.Label.Text, p.Y.Label.TextStyle
	p.Y.Label.Text = ""
	yLabelWidth := vg.Length(0)
	if yLabel != "" {
		yLabelWidth = yStyle.Height(yLabel) + p.Y.Label.Padding + vg.Points(4)
		yStyle.Rotation = math.Pi / 2
		yStyle.XAlign, yStyle.YAlign = text.XCenter, text.YCenter
		whole.FillText(yStyle, vg.Point{
			X: whole.Min.X + yLabelWidth/2,
			Y: (whole.Min.Y + whole.Max.Y - titleHeight) / 2,
		}, yLabel)
	}

	legend.Top, legend.Left = true, true
	legend.Padding = vg.Points(4)
	legendWidth := legend.Rectangle(whole).Size().X + 2*legendMargin
	p.Draw(draw.Crop(whole, yLabelWidth, -legendWidth, 0, 0))
	legend.Draw(draw.Crop(whole, whole.Size().X-legendWidth+legendMargin, -legendMargin, 0, -titleHeight))

	var buf bytes.Buffer
	if _, err := canvas.WriteTo(&buf); err != nil {
		return fmt.Errorf("report: plot %s: encode %s: %w", path, format, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("report: plot: %w", err)
	}
	return nil
}

// barSeries is one series of a grouped bar chart, drawn in data
// coordinates: the bar for category i spans [i+left, i+left+width] on the
// X axis and [base, value] on the Y axis. Unlike plotter.BarChart, which
// always rises from 0, it can rise from a positive base on a log axis.
type barSeries struct {
	values      []float64
	base        float64
	left, width float64
	fill        color.Color
	outline     draw.LineStyle
	labelValues bool
}

// drawn reports whether value v gets a bar: any finite value on a linear
// axis (0 shows as a flat outline), only positive ones on a log axis.
func (b *barSeries) drawn(v float64) bool {
	if !finite(v) {
		return false
	}
	return b.base == 0 || v > 0
}

// Plot implements plot.Plotter.
func (b *barSeries) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	labelStyle := p.Y.Tick.Label
	labelStyle.Font.Size = vg.Points(8)
	labelStyle.Rotation = 0
	labelStyle.XAlign = text.XCenter
	for i, v := range b.values {
		if !b.drawn(v) {
			continue
		}
		x0 := trX(float64(i) + b.left)
		x1 := trX(float64(i) + b.left + b.width)
		y0, y1 := trY(b.base), trY(v)
		rect := []vg.Point{{X: x0, Y: y0}, {X: x0, Y: y1}, {X: x1, Y: y1}, {X: x1, Y: y0}}
		c.FillPolygon(b.fill, c.ClipPolygonY(rect))
		c.StrokeLines(b.outline, c.ClipLinesY(append(rect, rect[0]))...)
		if b.labelValues {
			top, align := y1+vg.Points(2), text.YBottom
			if v < 0 {
				top, align = y1-vg.Points(2), text.YTop
			}
			labelStyle.YAlign = align
			c.FillText(labelStyle, vg.Point{X: (x0 + x1) / 2, Y: top}, Ms(v))
		}
	}
}

// DataRange implements plot.DataRanger: every category's slot and the
// values with the base.
func (b *barSeries) DataRange() (xmin, xmax, ymin, ymax float64) {
	ymin, ymax = b.base, b.base
	for _, v := range b.values {
		if b.drawn(v) {
			ymin, ymax = min(ymin, v), max(ymax, v)
		}
	}
	return -0.5, float64(len(b.values)) - 0.5, ymin, ymax
}

// Thumbnail implements plot.Thumbnailer for the legend.
func (b *barSeries) Thumbnail(c *draw.Canvas) {
	rect := []vg.Point{c.Min, {X: c.Min.X, Y: c.Max.Y}, c.Max, {X: c.Max.X, Y: c.Min.Y}}
	c.FillPolygon(b.fill, rect)
	c.StrokeLines(b.outline, append(rect, rect[0]))
}

// categoryLabelRoom makes the plot leave room on the left for slanted
// category names: plot.Plot pads its data area for glyph boxes of plotters
// but not for the X axis's own tick labels on the left side, so the first
// long name would be cut off at the image edge.
type categoryLabelRoom struct{}

// Plot implements plot.Plotter; it draws nothing.
func (categoryLabelRoom) Plot(draw.Canvas, *plot.Plot) {}

// GlyphBoxes implements plot.GlyphBoxer: the horizontal extent of every
// major X tick label, with no height so vertical padding is unaffected.
func (categoryLabelRoom) GlyphBoxes(p *plot.Plot) []plot.GlyphBox {
	var boxes []plot.GlyphBox
	for _, tick := range p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max) {
		if tick.IsMinor() {
			continue
		}
		r := p.X.Tick.Label.Rectangle(tick.Label)
		boxes = append(boxes, plot.GlyphBox{
			X:         p.X.Norm(tick.Value),
			Rectangle: vg.Rectangle{Min: vg.Point{X: r.Min.X}, Max: vg.Point{X: r.Max.X}},
		})
	}
	return boxes
}

// logTicks labels a log axis: every power of ten over wide ranges (every
// few powers beyond 10 decades), 1-2-5 steps over a few decades, every
// integer mantissa within about one decade, plot.DefaultTicks within half
// a decade, and the two ends when that still gives fewer than two labels.
func logTicks(lo, hi float64) []plot.Tick {
	if !(lo > 0) || !(hi > lo) {
		return nil
	}
	decades := math.Log10(hi / lo)
	if decades < 0.5 {
		// Too narrow for mantissa steps; evenly spaced values read better
		// and the log scale barely bends them.
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	var labelled []float64
	switch {
	case decades < 1.2:
		labelled = []float64{1, 2, 3, 4, 5, 6, 7, 8, 9}
	case decades < 3.5:
		labelled = []float64{1, 2, 5}
	default:
		labelled = []float64{1}
	}
	every := max(1, int(math.Ceil(decades/10))) // label at most ~10 decades
	var ticks []plot.Tick
	majors := 0
	first, last := int(math.Floor(math.Log10(lo))), int(math.Ceil(math.Log10(hi)))
	for k := first; k <= last; k++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow10(k)
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			label := ""
			if contains(labelled, float64(m)) && (m != 1 || k%every == 0) {
				label = tickLabel(v)
				majors++
			}
			if label == "" && decades > 10 {
				continue // minor ticks would be a smear
			}
			ticks = append(ticks, plot.Tick{Value: v, Label: label})
		}
	}
	if majors < 2 {
		ticks = append(ticks,
			plot.Tick{Value: lo, Label: strconv.FormatFloat(lo, 'g', 2, 64)},
			plot.Tick{Value: hi, Label: strconv.FormatFloat(hi, 'g', 2, 64)})
	}
	return ticks
}

// linearTicks labels a linear axis every 1, 2 or 5 times a power of ten,
// whichever gives about 5 to 10 labels, with unlabelled ticks between.
// (plot.DefaultTicks often gives only three, at odd values like 30, 90, 150.)
func linearTicks(lo, hi float64) []plot.Tick {
	if !finite(lo) || !finite(hi) || !(hi > lo) {
		return nil
	}
	step := math.Pow10(int(math.Floor(math.Log10((hi - lo) / 5))))
	for _, m := range []float64{1, 2, 5, 10} {
		if (hi-lo)/(m*step) <= 10 {
			step *= m
			break
		}
	}
	minor := step / 5
	if step/math.Pow10(int(math.Floor(math.Log10(step)))) == 2 {
		minor = step / 4
	}
	var ticks []plot.Tick
	for i := math.Ceil(lo / minor); i*minor <= hi*(1+1e-12); i++ {
		v := i * minor
		label := ""
		if r := math.Round(v / step); math.Abs(v/step-r) < 1e-9 {
			v = r * step
			label = tickLabel(v)
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: label})
		if len(ticks) > 200 {
			break // guard against a degenerate range
		}
	}
	return ticks
}

// tickLabel writes a tick value briefly: "0.05", "200", "10000", "1e+06".
func tickLabel(v float64) string {
	if v == 0 {
		return "0" // not "-0"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

func contains(xs []float64, x float64) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// positiveY returns the points with Y > 0.
func positiveY(pts plotter.XYs) plotter.XYs {
	var out plotter.XYs
	for _, p := range pts {
		if p.Y > 0 {
			out = append(out, p)
		}
	}
	return out
}
