package bench

import (
	"bufio"
	"os"
	"runtime"
	"strings"
)

// Machine describes where a report was measured.
type Machine struct {
	CPU        string `json:"cpu"`        // model name from /proc/cpuinfo, "" if unknown
	CPUs       int    `json:"cpus"`       // runtime.NumCPU
	GOMAXPROCS int    `json:"gomaxprocs"` // of the benchmark process (the server's is in its banner)
	Go         string `json:"go"`         // runtime.Version
	Kernel     string `json:"kernel"`     // uname release, "" if unknown
	OS         string `json:"os"`         // runtime.GOOS/GOARCH
}

func machineInfo() Machine {
	return Machine{
		CPU:        cpuModel("/proc/cpuinfo"),
		CPUs:       runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		Kernel:     kernelRelease(),
		OS:         runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// cpuModel returns the first "model name" in a cpuinfo file, or "".
func cpuModel(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "model name" {
			return strings.Join(strings.Fields(val), " ")
		}
	}
	return ""
}
