// Package report formats results for people: aligned tables, a progress line on a terminal, and PNG plots.
package report

import (
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// columnGap separates table columns.
const columnGap = "  "

// Table is a header and rows of cells, written with aligned columns. The
// zero Table has no columns; create one with NewTable. A Table is not safe
// for concurrent use.
type Table struct {
	header []string
	rows   [][]string
}

// NewTable returns an empty table with the given column headings.
func NewTable(header ...string) *Table {
	return &Table{header: append([]string(nil), header...)}
}

// Row appends a row. Missing cells at the end are written as ""; a row
// longer than the header adds columns with an empty heading.
func (t *Table) Row(cells ...string) {
	t.rows = append(t.rows, append([]string(nil), cells...))
}

// Write writes the header, a rule of dashes under each heading and the
// rows, columns separated by two spaces and lines ending in "\n" with no
// trailing spaces. A column whose non-empty cells are all numbers (as
// isNumber decides: "1,234", "-3.5", "95%", or "-" for none) is
// right-aligned, heading included; other columns are left-aligned. Widths
// count runes. It returns the first error from w.
func (t *Table) Write(w io.Writer) error {
	ncol := len(t.header)
	for _, r := range t.rows {
		ncol = max(ncol, len(r))
	}
	widths := make([]int, ncol)
	numeric := make([]bool, ncol)
	for c := range ncol {
		widths[c] = utf8.RuneCountInString(cell(t.header, c))
		numeric[c] = true
		sawNumber := false
		for _, r := range t.rows {
			s := cell(r, c)
			widths[c] = max(widths[c], utf8.RuneCountInString(s))
			switch {
			case s == "":
			case isNumber(s):
				sawNumber = sawNumber || s != "-"
			default:
				numeric[c] = false
			}
		}
		numeric[c] = numeric[c] && sawNumber
	}

	var b strings.Builder
	line := func(cells func(c int) string) {
		var l strings.Builder
		for c := range ncol {
			if c > 0 {
				l.WriteString(columnGap)
			}
			s := cells(c)
			pad := strings.Repeat(" ", widths[c]-utf8.RuneCountInString(s))
			if numeric[c] {
				l.WriteString(pad)
				l.WriteString(s)
			} else {
				l.WriteString(s)
				l.WriteString(pad)
			}
		}
		b.WriteString(strings.TrimRight(l.String(), " "))
		b.WriteByte('\n')
	}
	line(func(c int) string { return cell(t.header, c) })
	line(func(c int) string { return strings.Repeat("-", widths[c]) })
	for _, r := range t.rows {
		line(func(c int) string { return cell(r, c) })
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// cell returns cells[c], or "" past the end.
func cell(cells []string, c int) string {
	if c < len(cells) {
		return cells[c]
	}
	return ""
}

// isNumber reports whether s reads as a number in a table: "-" (no value),
// or a float with optional thousands commas and an optional trailing "%"
// or "x" (a ratio), as Ms, Pct and Num write them.
func isNumber(s string) bool {
	if s == "-" {
		return true
	}
	s = strings.TrimSuffix(s, "%")
	s = strings.TrimSuffix(s, "x")
	s = strings.ReplaceAll(s, ",", "")
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
