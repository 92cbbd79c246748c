module github.com/vigil-dev/vigil/deploy

go 1.26.0

require google.golang.org/grpc v1.85.0

require (
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/vigil-dev/vigil/pkg => ../pkg
