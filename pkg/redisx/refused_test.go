package redisx_test

import (
	"context"
	"errors"
	"github.com/vigil-dev/vigil/pkg/redisx"
	"testing"

	"github.com/vigil-dev/vigil/pkg/redistest"
	"github.com/vigil-dev/vigil/pkg/usererr"
)

func TestArgErrTurnsAGuardRefusalIntoInvalid(t *testing.T) {
	rdb, _ := redistest.Client(t)
	guard := redisx.NewScript("guard.lua", "if tonumber(ARGV[1]) == nil then return redis.error_reply('ERR guard.lua: want a number') end\nreturn 1")
	err := guard.Run(context.Background(), rdb, []string{"k"}, "x").Err()
	if !redisx.Refused(err) {
		t.Fatalf("Refused(%v) = false, want true", err)
	}
	if got := redisx.ArgErr(err); !errors.Is(got, usererr.ErrInvalid) {
		t.Errorf("ArgErr(%v) = %v, want ErrInvalid", err, got)
	}
	other := redisx.NewScript("boom.lua", "return redis.error_reply('ERR something else')")
	err = other.Run(context.Background(), rdb, []string{"k"}).Err()
	if redisx.Refused(err) || errors.Is(redisx.ArgErr(err), usererr.ErrInvalid) {
		t.Errorf("a non-guard error %v was taken for a refusal", err)
	}
}
