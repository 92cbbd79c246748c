package rest

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

	"github.com/vigil-dev/vigil/gateway/jsonapi"
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

// Backend is one served domain's name and connection, for the operators' routes.
type Backend struct {
	Name string
	Conn *grpc.ClientConn
}

// admin serves the operators' routes over the served domains' connections.
type admin struct {
	s        *Relay
	backends []Backend
}

// HandleAdmin adds the operators' routes to mux, over backends (the served domains, in the
// gateway's order).
func (s *Relay) HandleAdmin(mux Mux, backends []Backend) {
	g := &admin{s: s, backends: backends}
	handle := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, h) }
	handle("GET /admin/alarms", g.adminOverview)
	handle("GET /admin/{domain}/alarms", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
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
	handle("GET /admin/{domain}/dead-letters", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, _ *http.Request) (proto.Message, error) {
		return c.ListDeadLetters(ctx, &adminv1.ListDeadLettersRequest{})
	}))
	handle("POST /admin/{domain}/dead-letters/{id}/replay", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		return c.ReplayDeadLetter(ctx, &adminv1.ReplayDeadLetterRequest{Id: r.PathValue("id")})
	}))
	handle("DELETE /admin/{domain}/dead-letters/{id}", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		_, err := c.DiscardDeadLetter(ctx, &adminv1.DiscardDeadLetterRequest{Id: r.PathValue("id")})
		return nil, err
	}))
	handle("GET /admin/{domain}/objects/{id}", g.adminCall(func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error) {
		return c.LookupObject(ctx, &adminv1.LookupObjectRequest{Id: r.PathValue("id")})
	}))
}

// adminTimeout bounds one admin call; they read a few keys per shard.
const adminTimeout = 5 * time.Second

// adminCall runs one admin RPC on the backend of the path's domain and writes its answer in the
// API's JSON dialect; a nil message is 204.
func (g *admin) adminCall(call func(ctx context.Context, c adminv1.AlarmAdminServiceClient, r *http.Request) (proto.Message, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("domain")
		conn, ok := g.conn(name)
		if !ok {
			jsonapi.WriteError(w, http.StatusNotFound, fmt.Sprintf("No domain %q is served here; try one of %v.", name, g.adminDomainNames()))
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), adminTimeout)
		defer cancel()
		msg, err := call(ctx, adminv1.NewAlarmAdminServiceClient(conn), r)
		if status.Code(err) == codes.Unimplemented {
			jsonapi.WriteError(w, http.StatusNotFound, fmt.Sprintf("The %s domain keeps no alarms.", name))
			return
		}
		if err != nil {
			g.s.WriteRPCError(w, r.WithContext(ctx), err)
			return
		}
		if msg == nil {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		jsonapi.WriteMessage(w, msg)
	}
}

// adminDomainNames are the served domains, in the gateway's order.
func (g *admin) adminDomainNames() []string {
	names := make([]string, len(g.backends))
	for i, b := range g.backends {
		names[i] = b.Name
	}
	return names
}

// conn is the connection of the named domain.
func (g *admin) conn(name string) (*grpc.ClientConn, bool) {
	i := slices.IndexFunc(g.backends, func(b Backend) bool { return b.Name == name })
	if i < 0 {
		return nil, false
	}
	return g.backends[i].Conn, true
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
func (g *admin) adminOverview(w http.ResponseWriter, r *http.Request) {
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
					if b, err := jsonapi.Marshal(o); err == nil {
						line.OldestOverdue = b
					}
				}
			}
			lines[i] = line
		}(g.backends[i].Conn)
	}
	wg.Wait()
	out := struct {
		Now     int64           `json:"now"`
		Domains []*domainAlarms `json:"domains"`
	}{Now: time.Now().UnixMilli(), Domains: slices.DeleteFunc(lines, func(l *domainAlarms) bool { return l == nil })}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
