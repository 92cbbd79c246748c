package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
)

// runRooms is `vigil rooms list`: the practice rooms the lobby shows, most recently active first.
func runRooms(ctx context.Context, args []string, out, errOut io.Writer) error {
	sub, args, err := subcommand("rooms", args, "list")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("vigil rooms "+sub, flag.ContinueOnError)
	c := newCLI(fs, out, errOut)
	defer c.close()
	if rest, err := parse(fs, args); err != nil {
		return err
	} else if len(rest) > 0 {
		return fmt.Errorf("%w: vigil rooms list takes no arguments", errUsage)
	}
	client, err := c.lobby()
	if err != nil {
		return err
	}
	cctx, cancel := c.call(ctx)
	defer cancel()
	res, err := client.ListRooms(cctx, &lobbyv1.ListRoomsRequest{})
	if err != nil {
		return rpcError("list rooms", err)
	}
	if c.json {
		return c.printJSON(res)
	}
	rows := make([][]string, 0, len(res.GetRooms()))
	var viewers int64
	for _, r := range res.GetRooms() {
		viewers += int64(r.GetViewers())
		rows = append(rows, []string{r.GetCode(), r.GetName(), r.GetVideo().GetTitle(), strconv.Itoa(int(r.GetViewers())),
			strconv.FormatBool(r.GetLeaderPresent()), ms(r.GetLastActivity()), ms(r.GetCreatedAt())})
	}
	c.table([]string{"CODE", "NAME", "VIDEO", "VIEWERS", "LEADER", "LAST-ACTIVITY", "CREATED"}, rows)
	fmt.Fprintf(c.out, "%d rooms, %d viewers\n", len(rows), viewers)
	return nil
}
