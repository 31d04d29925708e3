// Package libtest holds the tests and benchmarks of package cpusched that
// need modules a user of the library must not get: pprof's profile
// parser, golang.org/x/exp/trace, golang.org/x/sync's baselines and
// goleak. It is a module of its own so that the library's go.mod requires
// golang.org/x/sys and nothing else (docs/modules.md); the tests here use
// the library's exported API only. It has no code.
package libtest
