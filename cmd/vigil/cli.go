package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/vigil-dev/vigil/pkg/alarmadmin"
	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	locksv1 "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"
	"github.com/vigil-dev/vigil/pkg/config"
	"github.com/vigil-dev/vigil/pkg/grpcdial"
	"github.com/vigil-dev/vigil/pkg/server"
	"github.com/vigil-dev/vigil/pkg/tracing"
)

// The operator commands (alarms, reservations, locks, rooms) talk to the domain services over
// gRPC with the generated clients. They print tables for people and, with --json, one JSON
// document for scripts, and they end with an exit code scripts can branch on:
//
//	0 done   1 failed   2 bad usage   3 not found   4 refused or check failed   5 unavailable
const (
	exitNotFound    = 3
	exitRefused     = 4
	exitUnavailable = 5
)

// exitError is an error that sets the process's exit status.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// opsExitCode is the exit status for an operator command's error; ok is false for errors that
// are not an operator command's (main handles those).
func opsExitCode(err error) (code int, ok bool) {
	var xe *exitError
	if errors.As(err, &xe) {
		return xe.code, true
	}
	return 0, false
}

// rpcError turns a failed call into a sentence and the exit status its code calls for. It is
// the one place gRPC codes become exit codes.
func rpcError(what string, err error) error {
	st := status.Convert(err)
	msg := fmt.Sprintf("%s: %s", what, st.Message())
	switch st.Code() {
	case codes.NotFound:
		return &exitError{exitNotFound, errors.New(msg)}
	case codes.InvalidArgument, codes.OutOfRange:
		return &exitError{2, errors.New(msg)}
	case codes.FailedPrecondition, codes.AlreadyExists, codes.Aborted, codes.PermissionDenied, codes.Unauthenticated:
		return &exitError{exitRefused, errors.New(msg)}
	case codes.Unavailable, codes.DeadlineExceeded:
		return &exitError{exitUnavailable, fmt.Errorf("%s: no answer (%s); is it running, and is the address right? "+
			"Where only the gateway is reachable (vigil dev, the compose file), add --gateway http://127.0.0.1:8080", what, st.Code())}
	case codes.Unimplemented:
		return &exitError{exitNotFound, fmt.Errorf("%s: the service does not offer this call", what)}
	}
	return &exitError{1, errors.New(msg)}
}

// domainAddrs are the gRPC addresses of the services, with their flags, env variables (the
// gateway's names) and the ports of the deployment's compose file.
var domainAddrs = []struct{ domain, env, def string }{
	{"reservations", "VIGIL_RESERVATIONS_ADDR", "127.0.0.1:7001"},
	{"locks", "VIGIL_LOCKS_ADDR", "127.0.0.1:7002"},
	{"lobby", "VIGIL_LOBBY_ADDR", "127.0.0.1:7004"},
	{"room", "VIGIL_ROOM_ADDR", "127.0.0.1:7005"},
}

// alarmDomains are the domains that keep alarms, in the order the commands list them.
var alarmDomains = []string{"reservations", "locks", "room"}

// cli is what every operator command shares: where the services are, how to print, and the
// connections it opened.
type cli struct {
	addrs   map[string]*string
	gateway string
	apiKey  string
	rc      *restClient
	json    bool
	timeout time.Duration
	out     io.Writer
	errOut  io.Writer
	conns   map[string]*grpc.ClientConn
}

// newCLI adds the shared flags to fs.
func newCLI(fs *flag.FlagSet, out, errOut io.Writer) *cli {
	c := &cli{addrs: map[string]*string{}, out: out, errOut: errOut, conns: map[string]*grpc.ClientConn{}}
	for _, d := range domainAddrs {
		c.addrs[d.domain] = config.String(fs, d.domain+"-addr", d.env, d.def, "gRPC address of the "+d.domain+" service")
	}
	fs.StringVar(&c.gateway, "gateway", os.Getenv("VIGIL_GATEWAY_URL"), "go through the gateway's REST routes at this URL (e.g. http://127.0.0.1:8080) instead of dialling the services (env VIGIL_GATEWAY_URL)")
	fs.StringVar(&c.apiKey, "api-key", os.Getenv("VIGIL_API_KEY"), "with --gateway: the API key (admin scope for alarms) (env VIGIL_API_KEY)")
	fs.BoolVar(&c.json, "json", false, "print JSON for scripts instead of a table")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up on a call after this long")
	fs.SetOutput(errOut)
	return c
}

// parse parses flags placed before, between or after the positional arguments, and returns
// the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// rest is the gateway's REST client when --gateway is set, else nil.
func (c *cli) rest() (*restClient, error) {
	if c.gateway == "" {
		return nil, nil
	}
	if c.rc == nil {
		base, err := gatewayBase(c.gateway)
		if err != nil {
			return nil, err
		}
		c.rc = &restClient{base: base, key: c.apiKey, http: &http.Client{}}
	}
	return c.rc, nil
}

// admin is domain's AlarmAdminService, through the gateway or directly.
func (c *cli) admin(domain string) (adminv1.AlarmAdminServiceClient, error) {
	if _, ok := c.addrs[domain]; !ok {
		return nil, &exitError{2, fmt.Errorf("%w: unknown domain %q; use one of %s", errUsage, domain, strings.Join(alarmDomains, ", "))}
	}
	return client(c, domain, func(r *restClient) adminv1.AlarmAdminServiceClient { return &restAdmin{r: r, domain: domain} }, adminv1.NewAlarmAdminServiceClient)
}

func (c *cli) reservations() (reservationsv1.ReservationServiceClient, error) {
	return client(c, "reservations", func(r *restClient) reservationsv1.ReservationServiceClient { return &restReservations{r: r} }, reservationsv1.NewReservationServiceClient)
}

func (c *cli) locks() (locksv1.LockServiceClient, error) {
	return client(c, "locks", func(r *restClient) locksv1.LockServiceClient { return &restLocks{r: r} }, locksv1.NewLockServiceClient)
}

func (c *cli) lobby() (lobbyv1.LobbyServiceClient, error) {
	return client(c, "lobby", func(r *restClient) lobbyv1.LobbyServiceClient { return &restLobby{r: r} }, lobbyv1.NewLobbyServiceClient)
}

// client is domain's client C: over the gateway's REST routes (overREST) when --gateway is
// set, else over the domain's gRPC connection (overGRPC, the generated New...Client).
func client[C any](c *cli, domain string, overREST func(*restClient) C, overGRPC func(grpc.ClientConnInterface) C) (C, error) {
	if rc, err := c.rest(); rc != nil || err != nil {
		return overREST(rc), err
	}
	cc, err := c.conn(domain)
	if err != nil {
		var none C
		return none, err
	}
	return overGRPC(cc), nil
}

// conn is the connection to domain's service, dialled once (lazily: errors show on the call).
func (c *cli) conn(domain string) (*grpc.ClientConn, error) {
	if cc, ok := c.conns[domain]; ok {
		return cc, nil
	}
	addr, ok := c.addrs[domain]
	if !ok {
		return nil, &exitError{2, fmt.Errorf("%w: unknown domain %q; use one of %s", errUsage, domain, strings.Join(alarmDomains, ", "))}
	}
	// TLS as the services are configured (VIGIL_TLS_CA, VIGIL_TLS_CERT, VIGIL_TLS_KEY,
	// VIGIL_TLS_SERVER_NAME); plaintext when none is set.
	creds, err := server.TLSFromEnv().DialOption()
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("%w: %v", errUsage, err)}
	}
	cc, err := grpcdial.New(*addr, append([]grpc.DialOption{creds}, tracing.DialOptions()...)...)
	if err != nil {
		return nil, &exitError{2, fmt.Errorf("%w: %s address %q: %v", errUsage, domain, *addr, err)}
	}
	c.conns[domain] = cc
	return cc, nil
}

func (c *cli) close() {
	for _, cc := range c.conns {
		_ = cc.Close()
	}
}

// call bounds one RPC by --timeout.
func (c *cli) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// printJSON writes v as indented JSON; proto messages look as they do at the gateway.
func (c *cli) printJSON(v any) error {
	if m, ok := v.(proto.Message); ok {
		b, err := protojson.Marshal(alarmadmin.Struct(m))
		if err != nil {
			return err
		}
		v = json.RawMessage(b)
	}
	enc := json.NewEncoder(c.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// show prints v as JSON with --json, else header and rows as a table.
func (c *cli) show(v any, header []string, rows [][]string) error {
	if c.json {
		return c.printJSON(v)
	}
	c.table(header, rows)
	return nil
}

// table prints rows under a header, aligned.
func (c *cli) table(header []string, rows [][]string) {
	tw := tabwriter.NewWriter(c.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	_ = tw.Flush()
}

// msgJSON is a message as a JSON value (for embedding in a --json document).
func msgJSON(m proto.Message) json.RawMessage {
	if m == nil || !m.ProtoReflect().IsValid() {
		return json.RawMessage("null")
	}
	b, err := protojson.Marshal(alarmadmin.Struct(m))
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// progress reports a long operation on stderr: rewriting one line on a terminal, a line every
// tenth of the way otherwise, so logs of scripted runs stay short.
type progress struct {
	w     io.Writer
	what  string
	total int
	tty   bool
	last  int
}

func (c *cli) progress(what string, total int) *progress {
	tty := false
	if f, ok := c.errOut.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			tty = true
		}
	}
	return &progress{w: c.errOut, what: what, total: total, tty: tty, last: -1}
}

// step reports that done of total are done.
func (p *progress) step(done int) {
	if p.total < 2 {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r%s %d/%d", p.what, done, p.total)
		if done == p.total {
			fmt.Fprintln(p.w)
		}
		return
	}
	if tenth := done * 10 / p.total; tenth != p.last {
		p.last = tenth
		fmt.Fprintf(p.w, "%s %d/%d\n", p.what, done, p.total)
	}
}

// ms formats a time in ms since the epoch for a table; 0 is "-".
func ms(t int64) string {
	if t == 0 {
		return "-"
	}
	return time.UnixMilli(t).UTC().Format("2006-01-02 15:04:05.000")
}

// dur formats a duration in ms for a table.
func dur(d int64) string {
	return (time.Duration(d) * time.Millisecond).String()
}

// runOps runs an operator command: alarms, reservations, locks or rooms.
func runOps(ctx context.Context, cmd string, args []string, out, errOut io.Writer) error {
	// With OTEL_EXPORTER_OTLP_ENDPOINT set, an operator's calls are traced like any other.
	if err := tracing.Setup(ctx, "vigil-cli"); err != nil {
		fmt.Fprintln(errOut, "vigil: tracing is off:", err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		tracing.Flush(fctx)
	}()
	switch cmd {
	case "alarms":
		return runAlarms(ctx, args, out, errOut)
	case "reservations":
		return runReservations(ctx, args, out, errOut)
	case "locks":
		return runLocks(ctx, args, out, errOut)
	case "rooms":
		return runRooms(ctx, args, out, errOut)
	}
	return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
}

// subcommand splits "<sub> [args]" and checks sub is one of subs.
func subcommand(cmd string, args []string, subs ...string) (string, []string, error) {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		return "", nil, fmt.Errorf("%w: vigil %s %s [flags] (add -h after one for its flags)", errUsage, cmd, strings.Join(subs, "|"))
	}
	for _, s := range subs {
		if args[0] == s {
			return s, args[1:], nil
		}
	}
	return "", nil, fmt.Errorf("%w: vigil %s has no %q; use %s", errUsage, cmd, args[0], strings.Join(subs, ", "))
}
