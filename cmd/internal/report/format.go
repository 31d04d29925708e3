package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Ms formats a value in milliseconds (or any measured quantity) to 3
// significant digits: "0.00123", "0.123", "1.50", "15.2", "152". From 1000
// up it writes the rounded integer with thousands commas: "1,234",
// "12,346". 0 is "0", NaN is "-", infinities are "inf" and "-inf".
func Ms(v float64) string {
	if s, ok := special(v); ok {
		return s
	}
	return sig3(v)
}

// Num formats a count: an integral value as an integer with thousands
// commas ("7", "1,234,567"), any other value like Ms ("0.500", "12.3",
// "1,235"). NaN is "-".
func Num(v float64) string {
	if s, ok := special(v); ok {
		return s
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return thousands(v)
	}
	return sig3(v)
}

// Pct formats a value that is already a percentage: "95%", "100%", "12%"
// from 9.95 up, one decimal below that ("2.5%", "0.4%"), "0%" for 0, "-"
// for NaN.
func Pct(v float64) string {
	if s, ok := special(v); ok {
		if s == "-" {
			return s
		}
		return s + "%"
	}
	if math.Abs(v) >= 9.95 {
		return fmt.Sprintf("%.0f%%", v)
	}
	return fmt.Sprintf("%.1f%%", v)
}

// special formats the values that have no digits: 0, NaN and infinities.
func special(v float64) (string, bool) {
	switch {
	case v == 0:
		return "0", true
	case math.IsNaN(v):
		return "-", true
	case math.IsInf(v, 1):
		return "inf", true
	case math.IsInf(v, -1):
		return "-inf", true
	}
	return "", false
}

// sig3 writes a finite, non-zero v to 3 significant digits in fixed-point
// notation, or as a comma-separated integer once it reaches 1000.
func sig3(v float64) string {
	// 'e' rounds correctly to 3 digits, so 9.996 becomes 1.00e+01 and the
	// exponent below is that of the rounded value.
	e := strconv.FormatFloat(v, 'e', 2, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp >= 3 {
		return thousands(v)
	}
	rounded, _ := strconv.ParseFloat(e, 64)
	return strconv.FormatFloat(rounded, 'f', 2-exp, 64)
}

// thousands writes v rounded to an integer with commas between groups of
// three digits.
func thousands(v float64) string {
	r := math.Round(v)
	if math.Abs(r) >= 1e18 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	digits := strconv.FormatInt(int64(math.Abs(r)), 10)
	var b strings.Builder
	if r < 0 {
		b.WriteByte('-')
	}
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}
