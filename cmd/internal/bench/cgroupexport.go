package bench

// The CPU quotas of Config.CPUQuota, for the child processes of other
// commands (fleet's replicas): the same cgroups, made, entered and removed
// by the same code, so that a fix here reaches them too.

// CPUQuotas makes cgroups with a CPU bandwidth limit, each for one child
// process.
type CPUQuotas struct{ fs *cgroupFS }

// OpenCPUQuotas finds the cpu controller, removes the cgroups that killed
// processes of this program left behind, and checks that a cgroup limited
// to cpus CPUs can be made and entered, as Run does before it starts a
// server under -cpu-quota. Its error wraps ErrCPUQuota and says why.
func OpenCPUQuotas(cpus float64) (*CPUQuotas, error) {
	fs, err := openCPUQuota(cpus)
	if err != nil {
		return nil, err
	}
	return &CPUQuotas{fs: fs}, nil
}

// String describes the cgroup mount, e.g. "cgroup v1 /sys/fs/cgroup/cpu".
func (q *CPUQuotas) String() string { return q.fs.String() }

// CPUQuota is one cgroup made by CPUQuotas.New.
type CPUQuota struct{ g *cpuCgroup }

// New makes a cgroup limited to cpus CPUs (a 100 ms period), or with no
// limit for cpus 0. Remove it once the process started in it has exited.
func (q *CPUQuotas) New(cpus float64) (*CPUQuota, error) {
	g, err := q.fs.create(nextCgroupName(), cpus)
	if err != nil {
		return nil, err
	}
	return &CPUQuota{g: g}, nil
}

// Wrap returns the command line that runs name with args inside the
// cgroup from its first instruction (the Go runtime reads the limit only
// at start-up): a shell that moves itself in and then execs name, so the
// process keeps the shell's pid and parent-death signal.
func (c *CPUQuota) Wrap(name string, args []string) (string, []string) {
	return c.g.inCgroup(name, args)
}

// Dir is the cgroup's directory.
func (c *CPUQuota) Dir() string { return c.g.dir }

// Remove removes the cgroup, retrying for a moment while the kernel still
// counts the exited process in it. It is safe to call more than once.
func (c *CPUQuota) Remove() error { return c.g.remove() }

// NewUnlimited makes a cgroup without a CPU limit (a new cgroup has none):
// the kernel shares the CPU between it and its siblings by their weights,
// equal by default, whatever the priorities of the threads inside, as
// between the containers of a machine. Remove it as New's.
func (q *CPUQuotas) NewUnlimited() (*CPUQuota, error) { return q.New(0) }

// CPUStat is one reading of a cgroup's CFS bandwidth accounting.
type CPUStat struct{ s cpuStat }

// ReadStat reads the cgroup's cpu.stat.
func (c *CPUQuota) ReadStat() (CPUStat, error) {
	s, err := c.g.readStat()
	return CPUStat{s}, err
}

// Since returns the accounting from earlier to s: the periods, throttled
// periods and throttled time (its ServerCPUs is 0: no process is read).
func (s CPUStat) Since(earlier CPUStat) CgroupCPUStat {
	return *s.s.since(earlier.s, 0)
}
