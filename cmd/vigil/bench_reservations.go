package main

import (
	"context"
	"errors"
)

// benchReservations measures the reservations service end to end.
func benchReservations(ctx context.Context, args []string) (*benchReport, benchOutput, error) {
	return nil, benchOutput{}, errors.New("vigil bench reservations: not written yet")
}
