//go:build race

package israce

// Enabled is true when the program was built with -race.
const Enabled = true
