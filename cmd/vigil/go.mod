module github.com/vigil-dev/vigil/cmd/vigil

go 1.26.0

require (
	github.com/vigil-dev/vigil/gateway v0.0.0
	github.com/vigil-dev/vigil/pkg v0.0.0
	github.com/vigil-dev/vigil/services/lobby v0.0.0
	github.com/vigil-dev/vigil/services/locks v0.0.0
	github.com/vigil-dev/vigil/services/reservations v0.0.0
	golang.org/x/sync v0.24.0
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/beorn7/perks v1.0.1 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus v1.1.1 // indirect
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4 // indirect
	github.com/grpc-ecosystem/grpc-gateway/v2 v2.33.0 // indirect
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	github.com/prometheus/procfs v0.22.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/api v0.0.0-20261026165753-2ffab32bce7e // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261019180522-ce908d29299b // indirect
	google.golang.org/grpc v1.85.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace (
	github.com/vigil-dev/vigil/gateway => ../../gateway
	github.com/vigil-dev/vigil/pkg => ../../pkg
	github.com/vigil-dev/vigil/services/lobby => ../../services/lobby
	github.com/vigil-dev/vigil/services/locks => ../../services/locks
	github.com/vigil-dev/vigil/services/reservations => ../../services/reservations
)
