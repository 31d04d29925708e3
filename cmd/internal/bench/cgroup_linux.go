//go:build linux

package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// openCgroups finds the cpu controller under cgroupMount, removes the
// cgroups that killed benchmarks left behind, and checks that a cgroup
// limited to cpus CPUs (0: no limit) can be made and entered. Its error
// says why; flag names the option that needs the cgroups.
func openCgroups(cpus float64, flag string) (*cgroupFS, error) {
	fs, err := findCgroupFS(cgroupMount)
	if err != nil {
		return nil, err
	}
	removeStaleCgroups(fs)
	if err := fs.check(cpus); err != nil {
		if errors.Is(err, os.ErrPermission) || errors.Is(err, syscall.EROFS) {
			err = fmt.Errorf("%v (%s needs root, or a cgroup delegated to this user, on a writable cgroup mount)", err, flag)
		}
		return nil, fmt.Errorf("%s: %v", fs, err)
	}
	return fs, nil
}

// removeStaleCgroups removes the cgroups named by a benchmark process that
// no longer exists (killed before it could remove them), and the cgroups
// of theirs below them (the tenants step's). A cgroup that still holds a
// process stays (rmdir fails).
func removeStaleCgroups(fs *cgroupFS) {
	entries, err := os.ReadDir(fs.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupNamePrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		dir := filepath.Join(fs.dir, e.Name())
		if below, err := os.ReadDir(dir); err == nil {
			for _, b := range below {
				if b.IsDir() && strings.HasPrefix(b.Name(), cgroupNamePrefix) {
					_ = fs.rmdir(filepath.Join(dir, b.Name()))
				}
			}
		}
		_ = fs.rmdir(dir)
	}
}
