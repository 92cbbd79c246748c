package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
)

// The operators' routes. Every domain service serves the same AlarmAdminService for its own
// alarm queue, so one service is reached on several backends: /admin/{domain}/... picks the
// backend connection by name and calls the generated client (grpc-gateway mounts a service on
// one backend only). These routes need the admin scope once authentication is on.
//
//	GET    /admin/alarms                              every domain's totals and oldest overdue alarm
//	GET    /admin/{domain}/alarms?next=N              ListPending (N of each shard's next alarms)
//	GET    /admin/{domain}/dead-letters               ListDeadLetters
//	POST   /admin/{domain}/dead-letters/{id}/replay   ReplayDeadLetter
//	DELETE /admin/{domain}/dead-letters/{id}          DiscardDeadLetter (204)
//	GET    /admin/{domain}/objects/{id}               LookupObject

// adminRoutes adds the operators' routes to mux.
func (g *Gateway) adminRoutes(mux *router) {
	mux.HandleFunc("GET /admin/alarms", g.adminOverview)
	mux.HandleFunc("GET /admin/{domain}/alarms", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		next := 0
		if s := r.URL.Query().Get("next"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > 100 {
				return nil, status.Error(codes.InvalidArgument, "next must be an integer from 0 through 100.")
			}
			next = n
		}
		return c.ListPending(ctx, &adminv1.ListPendingRequest{NextPerShard: int32(next)})
	}))
	mux.HandleFunc("GET /admin/{domain}/dead-letters", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, _ *http.Request) (proto.Message, error) {
		return c.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
	}))
	mux.HandleFunc("POST /admin/{domain}/dead-letters/{id}/replay", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		return c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{Id: r.PathValue("id")})
	}))
	mux.HandleFunc("DELETE /admin/{domain}/dead-letters/{id}", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		_, err := c.DiscardDeadLetter(ctx, &adminv1.DiscardDeadLetterRequest{Id: r.PathValue("id")})
		return nil, err
	}))
	mux.HandleFunc("GET /admin/{domain}/objects/{id}", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		return c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: r.PathValue("id")})
	}))
}

// adminTimeout bounds one admin call; they read a few keys per shard.
const adminTimeout = 5 * time.Second

// adminCall runs one admin RPC on the backend of the path's domain and writes its answer in the
// API's JSON dialect; a nil message is 204.
func (g *Gateway) adminCall(call func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("domain")
		conn, ok := g.conns[name]
		if !ok {
			writeError(w, http.StatusNotFound, fmt.Sprintf("No domain %q is served here; try one of %v.", name, g.adminDomainNames()))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		msg, err := call(ctx, adminv1.NewAlarmAdminServiceClient(conn), r)
		if status.Code(err) == codes.Unimplemented {
			writeError(w, http.StatusNotFound, fmt.Sprintf("The %s domain keeps no alarms.", name))
			return
		}
		if err != nil {
			g.writeRPCError(ctx, nil, nil, w, r, err)
			return
		}
		if msg == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		writeMessage(w, msg)
	}
}

func writeMessage(w http.ResponseWriter, msg proto.Message) {
	b, err := marshalAPI(msg)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "Internal error.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// adminDomainNames are the served domains, in the gateway's order.
func (g *Gateway) adminDomainNames() []string {
	var names []string
	for _, d := range g.o.domains() {
		if _, ok := g.conns[d.name]; ok {
			names = append(names, d.name)
		}
	}
	return names
}

// domainAlarms is one domain's line in the overview.
type domainAlarms struct {
	Domain        string          `json:"domain"`
	Pending       int64           `json:"pending"`
	Overdue       int64           `json:"overdue"`
	InFlight      int64           `json:"inFlight"`
	Dead          int64           `json:"dead"`
	OldestOverdue json.RawMessage `json:"oldestOverdue"`
	// Error says why the domain could not be read; null when it was.
	Error *string `json:"error"`
}

// adminOverview asks every served domain for its alarm totals at once. Domains that keep no
// alarms (they don't serve the admin service) are left out; one that fails is listed with its
// error, so the page still shows the others.
func (g *Gateway) adminOverview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
	defer cancel()
	names := g.adminDomainNames()
	lines := make([]*domainAlarms, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func(conn *grpc.ClientConn) {
			defer wg.Done()
			res, err := adminv1.NewAlarmAdminServiceClient(conn).ListPending(ctx, &adminv1.ListPendingRequest{NextPerShard: 1})
			if status.Code(err) == codes.Unimplemented {
				return
			}
			line := &domainAlarms{Domain: name, OldestOverdue: json.RawMessage("null")}
			if err != nil {
				msg := "The domain's admin service did not answer: " + status.Code(err).String() + "."
				line.Error = &msg
			} else {
				line.Pending, line.Overdue, line.InFlight, line.Dead = res.GetPending(), res.GetOverdue(), res.GetInFlight(), res.GetDead()
				if o := res.GetOldestOverdue(); o != nil {
					if b, err := marshalAPI(o); err == nil {
						line.OldestOverdue = b
					}
				}
			}
			lines[i] = line
		}(g.conns[name])
	}
	wg.Wait()
	out := struct {
		Now     int64           `json:"now"`
		Domains []*domainAlarms `json:"domains"`
	}{Now: time.Now().UnixMilli(), Domains: slices.DeleteFunc(lines, func(l *domainAlarms) bool { return l == nil })}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
