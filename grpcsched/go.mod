module github.com/cpusched/cpusched/grpcsched

go 1.26.0

replace github.com/cpusched/cpusched => ../

require (
	github.com/cncf/xds/go v0.0.0-20260202195803-dba9d589def2
	github.com/cpusched/cpusched v0.0.0-00010101000000-000000000000
	go.uber.org/goleak v1.3.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/envoyproxy/protoc-gen-validate v1.3.3 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260817212433-ac3dfec99bb1 // indirect
)
