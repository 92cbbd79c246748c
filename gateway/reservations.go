package gateway

import (
	"context"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/input"
)

func reservationsDomain(addr string) domain {
	return domain{
		name: "reservations",
		addr: backendTarget(addr),
		rest: func(ctx context.Context, mux *runtime.ServeMux, cc *grpc.ClientConn) error {
			return reservationsv1.RegisterReservationServiceHandlerClient(ctx, mux, reservationsv1.NewReservationServiceClient(cc))
		},
		// The writes skip the grpc-gateway runtime (unary.go); reads stay on it.
		own: func(g *Gateway, mux *router, cc *grpc.ClientConn) {
			c := reservationsv1.NewReservationServiceClient(cc)
			handleUnary(g, mux, "POST /reservations/{reservationId}", http.StatusCreated,
				func(ctx context.Context, req *reservationsv1.CreateReservationRequest) (proto.Message, error) {
					res, err := c.CreateReservation(ctx, req)
					return res.GetReservation(), err
				})
			handleUnary(g, mux, "POST /reservations/{reservationId}/confirm", http.StatusOK,
				func(ctx context.Context, req *reservationsv1.ConfirmReservationRequest) (proto.Message, error) {
					res, err := c.ConfirmReservation(ctx, req)
					return res.GetReservation(), err
				})
			handleUnary(g, mux, "POST /reservations/{reservationId}/release", http.StatusOK,
				func(ctx context.Context, req *reservationsv1.ReleaseReservationRequest) (proto.Message, error) {
					res, err := c.ReleaseReservation(ctx, req)
					return res.GetReservation(), err
				})
		},
		created: map[string]int{
			"/vigil.reservations.v1.ReservationService/CreateReservation": http.StatusCreated,
		},
		allowEmpty: []protoreflect.FullName{
			"vigil.reservations.v1.ConfirmReservationRequest",
			"vigil.reservations.v1.ReleaseReservationRequest",
		},
		fieldErrors: map[protoreflect.FullName]string{
			"vigil.reservations.v1.CreateReservationRequest.ttl_seconds": "ttlSeconds must be an integer from 5 through 3600.",
			"vigil.reservations.v1.ReplayAlarmRequest.now":               input.PositiveSafeInt("now", 0).Error(),
		},
	}
}
