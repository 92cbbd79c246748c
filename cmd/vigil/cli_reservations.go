package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
)

// runReservations is `vigil reservations get|create`.
func runReservations(ctx context.Context, args []string, out, errOut io.Writer) error {
	sub, args, err := subcommand("reservations", args, "get", "create")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("vigil reservations "+sub, flag.ContinueOnError)
	c := newCLI(fs, out, errOut)
	defer c.close()
	ttl := time.Minute
	if sub == "create" {
		fs.DurationVar(&ttl, "ttl", time.Minute, "how long the hold lasts (5s through 1h, whole seconds)")
	}
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ids) != 1 {
		return fmt.Errorf("%w: vigil reservations %s <id> [flags]", errUsage, sub)
	}
	client, err := c.reservations()
	if err != nil {
		return err
	}
	admin, err := c.admin("reservations")
	if err != nil {
		return err
	}
	cctx, cancel := c.call(ctx)
	defer cancel()
	var r *reservationsv1.Reservation
	if sub == "create" {
		if ttl%time.Second != 0 {
			return fmt.Errorf("%w: --ttl must be whole seconds", errUsage)
		}
		res, err := client.CreateReservation(cctx, &reservationsv1.CreateReservationRequest{ReservationId: ids[0], TtlSeconds: int32(ttl / time.Second)})
		if err != nil {
			return rpcError("create reservation "+ids[0], err)
		}
		r = res.GetReservation()
	} else {
		res, err := client.GetReservation(cctx, &reservationsv1.GetReservationRequest{ReservationId: ids[0]})
		if err != nil {
			return rpcError("get reservation "+ids[0], err)
		}
		r = res.GetReservation()
	}
	// The alarm as the queue holds it (in flight, attempts, dead letter), when the service
	// serves the admin calls; the reservation alone otherwise.
	look, lookErr := admin.LookupObject(cctx, &adminv1.LookupObjectRequest{Id: ids[0]})
	if c.json {
		doc := map[string]any{"reservation": msgJSON(r)}
		if lookErr == nil {
			doc["alarm"], doc["deadLetter"] = msgJSON(look.GetAlarm()), msgJSON(look.GetDeadLetter())
		}
		if err := c.printJSON(doc); err != nil {
			return err
		}
	} else {
		rows := [][]string{
			{"id", r.GetReservationId()},
			{"status", r.GetStatus()},
			{"createdAt", ms(r.GetCreatedAt())},
			{"expiresAt", ms(r.GetExpiresAt())},
			{"expiredAt", ms(r.GetExpiredAt())},
			{"expirationCount", strconv.FormatInt(r.GetExpirationCount(), 10)},
			{"alarmAt", ms(r.GetAlarmAt())},
		}
		if lookErr == nil {
			if a := look.GetAlarm(); a != nil && a.GetInFlight() {
				rows = append(rows, []string{"alarm", fmt.Sprintf("in flight, attempt %d, next at %s", a.GetAttempts(), ms(a.GetDueAt()))})
			}
			if d := look.GetDeadLetter(); d != nil {
				rows = append(rows, []string{"dead letter", fmt.Sprintf("since %s after %d attempts: %s", ms(d.GetDeadAt()), d.GetAttempts(), d.GetError())})
			}
		}
		c.table([]string{"FIELD", "VALUE"}, rows)
	}
	if r.GetStatus() == "missing" {
		return &exitError{exitNotFound, fmt.Errorf("reservation %q was never created", ids[0])}
	}
	return nil
}
