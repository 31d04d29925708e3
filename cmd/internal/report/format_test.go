package report

import (
	"math"
	"testing"
)

func TestMs(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{0.00123, "0.00123"},
		{0.123, "0.123"},
		{0.1234, "0.123"},
		{0.9996, "1.00"},
		{1.5, "1.50"},
		{9.996, "10.0"},
		{15.24, "15.2"},
		{99.96, "100"},
		{152.4, "152"},
		{999.4, "999"},
		{999.6, "1,000"},
		{1234.4, "1,234"},
		{1234567.8, "1,234,568"},
		{-0.5, "-0.500"},
		{-1234, "-1,234"},
		{math.NaN(), "-"},
		{math.Inf(1), "inf"},
		{math.Inf(-1), "-inf"},
	}
	for _, tt := range tests {
		if got := Ms(tt.in); got != tt.want {
			t.Errorf("Ms(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNum(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0"},
		{7, "7"},
		{100, "100"},
		{1000, "1,000"},
		{1234567, "1,234,567"},
		{-98765, "-98,765"},
		{0.5, "0.500"},
		{12.34, "12.3"},
		{1234.5, "1,235"},
		{1e20, "1e+20"},
		{math.NaN(), "-"},
	}
	for _, tt := range tests {
		if got := Num(tt.in); got != tt.want {
			t.Errorf("Num(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPct(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0%"},
		{95, "95%"},
		{99.6, "100%"},
		{100, "100%"},
		{12.4, "12%"},
		{9.96, "10%"},
		{9.94, "9.9%"},
		{2.5, "2.5%"},
		{0.44, "0.4%"},
		{-3.25, "-3.2%"},
		{math.NaN(), "-"},
		{math.Inf(1), "inf%"},
	}
	for _, tt := range tests {
		if got := Pct(tt.in); got != tt.want {
			t.Errorf("Pct(%v): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
