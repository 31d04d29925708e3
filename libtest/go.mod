module github.com/cpusched/cpusched/libtest

go 1.26.0

replace github.com/cpusched/cpusched => ../

require (
	github.com/cpusched/cpusched v0.0.0-00010101000000-000000000000
	github.com/google/pprof v0.0.0-20261105003125-4bf881d7fb0b
	go.uber.org/goleak v1.3.0
	golang.org/x/exp v0.0.0-20261113113407-e3970619a1a4
	golang.org/x/sync v0.25.0
)

require golang.org/x/sys v0.50.0 // indirect
