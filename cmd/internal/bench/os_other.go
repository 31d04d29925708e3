//go:build !linux

package bench

// kernelRelease is unknown here.
func kernelRelease() string { return "" }
