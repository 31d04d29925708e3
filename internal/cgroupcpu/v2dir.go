package cgroupcpu

import (
	"errors"
	"os"
	"path/filepath"
)

// V2Dir returns the directory of this process's cgroup in the cgroup v2
// hierarchy, with every path under root ("/" for the real one, a fake
// tree in tests), and ok false where that hierarchy is not mounted (cgroup
// v1 alone, no /proc, not Linux). On a host with both hierarchies (this
// project's machines) it is the v2 one's, which no controller may use but
// which the kernel's pressure accounting (cpu.pressure) follows. An error
// means /proc/self/cgroup was there but another file could not be read.
func V2Dir(root string) (dir string, ok bool, err error) {
	cg, mi, found, err := readSelf(root)
	if !found || err != nil {
		return "", false, err
	}
	_, path, _, hasV2 := parseCgroupFile(cg)
	m, mounted := parseMountinfo(mi).v2()
	if !hasV2 || !mounted {
		return "", false, nil
	}
	_, dir, ok = m.dirOf(root, path)
	return dir, ok, nil
}

// readSelf reads /proc/self/cgroup and /proc/self/mountinfo under root;
// found is false where the first is not there (not Linux, or no /proc).
func readSelf(root string) (cgroup, mountinfo []byte, found bool, err error) {
	cgroup, err = os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, err
	}
	mountinfo, err = os.ReadFile(filepath.Join(root, "proc/self/mountinfo"))
	if err != nil {
		return nil, nil, false, err
	}
	return cgroup, mountinfo, true, nil
}
