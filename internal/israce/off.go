//go:build !race

// Package israce tells tests whether the race detector is on: it slows
// the scheduler about tenfold, so the longest tests run less under it.
package israce

// Enabled is true when the program was built with -race.
const Enabled = false
