// Package composepause is issue 25's outcome tried as an operator would: the project's own
// compose file (deploy/docker-compose.yml, the open stack, under its own project name and
// port) scaled to two replicas each of room, chat and locks, with clients that only speak to
// the gateway: 30 practice-room viewers and a leader and 30 chat members on WebSockets, REST
// lock acquires and releases, the lobby's viewer count read over REST. The replica of each of
// room, chat and locks that serves the gateway's streams is frozen with `docker pause`; the
// test says what the clients saw (socket closes, each sync and message delivered once, the
// viewer count, every REST call's time and answer), then after `docker unpause` that nothing
// was doubled. Then the same with one replica each and a 30 s pause.
//
// Every time it measures is printed (the room's and chat's upstream move, the longest time
// REST calls were unavailable), with the load average.
//
// The tests carry the build tag composepause: `make test-compose-pause` builds the images and
// runs them (go test -tags composepause ./deploy/composepause). They need Docker and
// docker-compose (or the Docker CLI's compose plugin) and the images of `make images`.
package composepause
