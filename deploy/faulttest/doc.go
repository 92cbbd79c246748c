// Package faulttest holds Vigil's cluster and fault suites: tests that start real services
// against real Redis (single servers, and a Redis Cluster of containers), break something on
// purpose — a master killed mid-load, Redis SIGKILLed, Redis unreachable, a gateway restarted
// under WebSocket load, more calls than the services can take — and count what was at stake and
// what was lost. `make test-cluster` and `make test-faults` run them (see docs/OPERATIONS.md).
//
// The tests carry the build tag faulttest, so that `make test` (go test ./...) does not run
// them a second time: go test -tags faulttest ./deploy/faulttest.
package faulttest
