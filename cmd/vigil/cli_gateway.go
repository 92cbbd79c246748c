package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
)

// Through the gateway: when only the gateway is reachable (the compose file publishes only its
// port; `vigil dev` gives the services free ports), --gateway makes the operator commands use
// its REST routes instead of dialling the services. The same generated client interfaces are
// implemented over HTTP, so every command works either way, and errors come back as gRPC
// statuses so they end with the same exit codes.

// restClient calls the gateway's REST routes.
type restClient struct {
	base string
	key  string
	http *http.Client
}

// call sends in (when not nil) as JSON and decodes the answer into out (when not nil). Bodies
// are plain maps: the API wants 64-bit numbers as JSON numbers, which protojson writes as
// strings.
func (r *restClient) call(ctx context.Context, method, path string, in map[string]any, out proto.Message) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, body)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Authorization", "Bearer "+r.key)
	}
	res, err := r.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return status.Error(codes.DeadlineExceeded, ctx.Err().Error())
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if res.StatusCode >= 300 {
		var e struct {
			Error string `json:"error"`
		}
		msg := fmt.Sprintf("the gateway answered %s", res.Status)
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return status.Error(httpCode(res.StatusCode), msg)
	}
	if out == nil || res.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(raw, out); err != nil {
		return status.Errorf(codes.Internal, "the gateway's answer is not what this vigil expects: %v", err)
	}
	return nil
}

// httpCode is the gRPC code of an HTTP error status, as the gateway maps them the other way.
func httpCode(s int) codes.Code {
	switch s {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return codes.InvalidArgument
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.NotFound
	case http.StatusConflict:
		return codes.FailedPrecondition
	case http.StatusTooManyRequests:
		return codes.ResourceExhausted
	case http.StatusServiceUnavailable, http.StatusBadGateway:
		return codes.Unavailable
	case http.StatusGatewayTimeout:
		return codes.DeadlineExceeded
	}
	return codes.Unknown
}

func esc(s string) string { return url.PathEscape(s) }

// restAdmin is one domain's AlarmAdminService through /admin/{domain}/.
type restAdmin struct {
	r      *restClient
	domain string
}

var _ adminv1.AlarmAdminServiceClient = (*restAdmin)(nil)

func (a *restAdmin) path(p string) string { return "/admin/" + esc(a.domain) + p }

func (a *restAdmin) ListPending(ctx context.Context, in *adminv1.ListPendingRequest, _ ...grpc.CallOption) (*adminv1.ListPendingResponse, error) {
	out := &adminv1.ListPendingResponse{}
	return out, a.r.call(ctx, http.MethodGet, a.path("/alarms?next="+strconv.Itoa(int(in.GetNextPerShard()))), nil, out)
}

func (a *restAdmin) ListDeadLetters(ctx context.Context, _ *adminv1.ListDeadLettersRequest, _ ...grpc.CallOption) (*adminv1.ListDeadLettersResponse, error) {
	out := &adminv1.ListDeadLettersResponse{}
	return out, a.r.call(ctx, http.MethodGet, a.path("/dead-letters"), nil, out)
}

func (a *restAdmin) ReplayDeadLetter(ctx context.Context, in *adminv1.ReplayDeadLetterRequest, _ ...grpc.CallOption) (*adminv1.ReplayDeadLetterResponse, error) {
	out := &adminv1.ReplayDeadLetterResponse{}
	return out, a.r.call(ctx, http.MethodPost, a.path("/dead-letters/"+esc(in.GetId())+"/replay"), nil, out)
}

func (a *restAdmin) DiscardDeadLetter(ctx context.Context, in *adminv1.DiscardDeadLetterRequest, _ ...grpc.CallOption) (*adminv1.DiscardDeadLetterResponse, error) {
	return &adminv1.DiscardDeadLetterResponse{}, a.r.call(ctx, http.MethodDelete, a.path("/dead-letters/"+esc(in.GetId())), nil, nil)
}

func (a *restAdmin) LookupObject(ctx context.Context, in *adminv1.LookupObjectRequest, _ ...grpc.CallOption) (*adminv1.LookupObjectResponse, error) {
	out := &adminv1.LookupObjectResponse{}
	return out, a.r.call(ctx, http.MethodGet, a.path("/objects/"+esc(in.GetId())), nil, out)
}

// restReservations is ReservationService through /reservations/. Only the calls the commands
// make are offered.
type restReservations struct {
	reservationsv1.ReservationServiceClient
	r *restClient
}

func (x *restReservations) CreateReservation(ctx context.Context, in *reservationsv1.CreateReservationRequest, _ ...grpc.CallOption) (*reservationsv1.CreateReservationResponse, error) {
	r := &reservationsv1.Reservation{}
	body := map[string]any{"ttlSeconds": in.GetTtlSeconds()}
	err := x.r.call(ctx, http.MethodPost, "/reservations/"+esc(in.GetReservationId()), body, r)
	return &reservationsv1.CreateReservationResponse{Reservation: r}, err
}

func (x *restReservations) GetReservation(ctx context.Context, in *reservationsv1.GetReservationRequest, _ ...grpc.CallOption) (*reservationsv1.GetReservationResponse, error) {
	r := &reservationsv1.Reservation{}
	err := x.r.call(ctx, http.MethodGet, "/reservations/"+esc(in.GetReservationId()), nil, r)
	return &reservationsv1.GetReservationResponse{Reservation: r}, err
}

// restLocks is LockService through /locks/.
type restLocks struct {
	r *restClient
}

var _ locksv1.LockServiceClient = (*restLocks)(nil)

func (x *restLocks) Acquire(ctx context.Context, in *locksv1.AcquireRequest, _ ...grpc.CallOption) (*locksv1.AcquireResponse, error) {
	out := &locksv1.AcquireResponse{}
	body := map[string]any{"owner": in.GetOwner()}
	if in.TtlMs != nil {
		body["ttlMs"] = in.GetTtlMs()
	}
	if in.WaitMs != nil {
		body["waitMs"] = in.GetWaitMs()
	}
	return out, x.r.call(ctx, http.MethodPost, "/locks/"+esc(in.GetResource())+"/acquire", body, out)
}

// Session has no REST route: the gateway serves the unary calls, which is all the CLI uses.
func (x *restLocks) Session(context.Context, ...grpc.CallOption) (grpc.BidiStreamingClient[locksv1.SessionRequest, locksv1.SessionResponse], error) {
	return nil, status.Error(codes.Unimplemented, "lock sessions are gRPC only; the gateway serves the unary lock calls")
}

func (x *restLocks) Release(ctx context.Context, in *locksv1.ReleaseRequest, _ ...grpc.CallOption) (*locksv1.ReleaseResponse, error) {
	out := &locksv1.ReleaseResponse{}
	return out, x.r.call(ctx, http.MethodPost, "/locks/"+esc(in.GetResource())+"/release", map[string]any{"owner": in.GetOwner()}, out)
}

func (x *restLocks) Renew(ctx context.Context, in *locksv1.RenewRequest, _ ...grpc.CallOption) (*locksv1.RenewResponse, error) {
	out := &locksv1.RenewResponse{}
	body := map[string]any{"owner": in.GetOwner()}
	if in.TtlMs != nil {
		body["ttlMs"] = in.GetTtlMs()
	}
	return out, x.r.call(ctx, http.MethodPost, "/locks/"+esc(in.GetResource())+"/renew", body, out)
}

func (x *restLocks) Get(ctx context.Context, in *locksv1.GetRequest, _ ...grpc.CallOption) (*locksv1.GetResponse, error) {
	out := &locksv1.GetResponse{}
	return out, x.r.call(ctx, http.MethodGet, "/locks/"+esc(in.GetResource()), nil, out)
}

// restLobby is LobbyService through /lobby/. Only ListRooms is offered.
type restLobby struct {
	lobbyv1.LobbyServiceClient
	r *restClient
}

func (x *restLobby) ListRooms(ctx context.Context, _ *lobbyv1.ListRoomsRequest, _ ...grpc.CallOption) (*lobbyv1.ListRoomsResponse, error) {
	out := &lobbyv1.ListRoomsResponse{}
	return out, x.r.call(ctx, http.MethodGet, "/lobby/rooms", nil, out)
}

// gatewayBase checks and normalises --gateway.
func gatewayBase(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: --gateway must be an http:// or https:// URL, like http://127.0.0.1:8080", errUsage)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
