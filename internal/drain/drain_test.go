package drain

import (
	"testing"
	"time"
)

func TestCutAt(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		left, want time.Duration // the deadline and the cut, from now
	}{
		{30 * time.Second, 29 * time.Second},
		{2 * time.Second, time.Second},
		{time.Second, 500 * time.Millisecond}, // less than 2*Grace: half-way
		{100 * time.Millisecond, 50 * time.Millisecond},
		{0, 0},
		{-time.Second, 0}, // the deadline has passed: at once
	}
	for _, tt := range tests {
		if got := CutAt(now, now.Add(tt.left)).Sub(now); got != tt.want {
			t.Errorf("CutAt with %v left: got %v from now, want %v", tt.left, got, tt.want)
		}
	}
}
