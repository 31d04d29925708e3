//go:build !linux

package osprio

func lowerNice(int, int) error { return errUnsupported }
