module github.com/cpusched/cpusched/examples

go 1.26.0

replace github.com/cpusched/cpusched => ../

require (
	github.com/cpusched/cpusched v0.0.0-00010101000000-000000000000
	github.com/go-chi/chi/v5 v5.5.0
	go.uber.org/goleak v1.3.0
)

require golang.org/x/sys v0.50.0 // indirect
