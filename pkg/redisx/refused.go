package redisx

import (
	"errors"
	"regexp"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/usererr"
)

// refusedPattern matches the reply of a script's argument guard. Every Vigil script checks its
// ARGV before its first write and answers `redis.error_reply('ERR <name>.lua: want <what>')`
// (or `ERR <name> script: want ...` for a shared prelude) when they are wrong.
var refusedPattern = regexp.MustCompile(`^ERR [\w.-]+(?:\.lua| script): want `)

// Refused reports whether err is a script's argument guard refusing its arguments: the request
// carried a value the service's own checks should have stopped, and nothing was written.
func Refused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && refusedPattern.MatchString(re.Error())
}

// ArgErr turns a script's refusal of its arguments into a usererr.ErrInvalid (InvalidArgument
// at the transport, 400 at the gateway), never Unavailable: retrying the same request cannot
// help. Any other error is returned as it is.
func ArgErr(err error) error {
	if Refused(err) {
		return &usererr.Error{Kind: usererr.ErrInvalid, Msg: "A value in the request is out of range; nothing was changed."}
	}
	return err
}
