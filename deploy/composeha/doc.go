// Package composeha is issue 43's acceptance ("acknowledged means kept") tried as an operator
// would: the highly available stack of `VIGIL_HA=1 VIGIL_INSECURE=1 make compose-up`
// (deploy/compose-up.sh with docker-compose.yml and docker-compose.ha.yml: every domain's
// store a primary and two replicas watched by three Sentinels, the services acknowledging a
// write only once a replica has it) under its own project name and gateway port, with REST
// clients that only speak to the gateway: contended locks whose fencing tokens are recorded,
// chat posts with postIds, reservation holds created and confirmed, lobby rooms created.
//
// Under that load, one domain's current primary (asked of a Sentinel) is in turn SIGKILLed
// (docker kill, started again after the failover), frozen past the failover timeout (docker
// pause, then unpause: it must come back as a replica), cut off from everyone (iptables in
// its network namespace drops every packet, until after the failover; docker network
// disconnect deadlocked Docker 20.10's daemon here) and isolated from its replicas
// and the sentinels while the services still reach it (iptables in its network namespace:
// the one fault where a write acknowledged without a replica's copy is lost, as it is with
// VIGIL_REDIS_DURABILITY=async). The test counts per domain
// what was acknowledged, what of it is gone afterwards (lost, which must be 0), what was left
// unknown (a 503 or no answer, repeated as docs/API.md says), whether each lock's fencing
// tokens only grew, and the longest time a domain did not answer, bounded by the Sentinels'
// down-after and failover timeout plus the services' Redis call timeout.
//
// The test carries the build tag composeha: `make test-compose-ha` builds the images and runs
// it (go test -tags composeha ./deploy/composeha). It needs Docker, docker-compose (or the
// Docker CLI's compose plugin), nsenter and iptables, root, the images of `make images` and
// vigil/redis:local.
package composeha
