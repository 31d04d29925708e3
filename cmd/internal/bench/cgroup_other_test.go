//go:build !linux

package bench

// cgroupChildEnv and runCgroupChild serve TestChildSeesCPUQuota, which runs
// on Linux only (cgroup_linux_test.go); TestMain refers to them everywhere.
const cgroupChildEnv = "BENCH_TEST_CGROUP_CHILD"

func runCgroupChild() {}
