//go:build !linux

package osprio

type cpuSet struct{}

func cpu() int { return -1 }

func readAffinity(*cpuSet) bool { return false }

func writeAffinity(*cpuSet) error { return errUnsupported }

func pinThread(int, int) error { return errUnsupported }

func writeAffinityOf(int, *cpuSet) error { return errUnsupported }

func cpusOf(*cpuSet) []int { return nil }

func processCPUs() []int { return nil }
