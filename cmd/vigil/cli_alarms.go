package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
)

// runAlarms is `vigil alarms list|dead|replay|discard|get`: the alarm queues of the domains,
// through each service's AlarmAdminService.
func runAlarms(ctx context.Context, args []string, out, errOut io.Writer) error {
	sub, args, err := subcommand("alarms", args, "list", "dead", "replay", "discard", "get")
	if err != nil {
		return err
	}
	fs := flag.NewFlagSet("vigil alarms "+sub, flag.ContinueOnError)
	c := newCLI(fs, out, errOut)
	defer c.close()
	domain := fs.String("domain", "", "the domain (reservations, locks, room); list and dead default to all")
	switch sub {
	case "list":
		next := fs.Int("next", 3, "how many of each shard's next alarms to show with --shards (0-100)")
		shards := fs.Bool("shards", false, "show each shard that holds alarms, with its next ones")
		check := fs.Bool("check", false, "exit 4 when an alarm is later than --late or any alarm is dead-lettered")
		late := fs.Duration("late", time.Second, "with --check: how late an overdue alarm may be")
		if _, err := parse(fs, args); err != nil {
			return err
		}
		return c.alarmsList(ctx, domainsOf(*domain), *domain == "", *next, *shards, *check, *late)
	case "dead":
		if _, err := parse(fs, args); err != nil {
			return err
		}
		return c.alarmsDead(ctx, domainsOf(*domain), *domain == "")
	case "replay", "discard":
		all := fs.Bool("all", false, "act on every dead letter of the domain")
		ids, err := parse(fs, args)
		if err != nil {
			return err
		}
		if *domain == "" || (len(ids) == 0) == !*all {
			return fmt.Errorf("%w: vigil alarms %s --domain <domain> (<id>... | --all)", errUsage, sub)
		}
		return c.alarmsSettle(ctx, sub, *domain, ids, *all)
	default: // get
		ids, err := parse(fs, args)
		if err != nil {
			return err
		}
		if *domain == "" || len(ids) != 1 {
			return fmt.Errorf("%w: vigil alarms get --domain <domain> <id>", errUsage)
		}
		return c.alarmsGet(ctx, *domain, ids[0])
	}
}

func domainsOf(flag string) []string {
	if flag == "" {
		return alarmDomains
	}
	return strings.Split(flag, ",")
}

// domainPending is one domain's answer to ListPending, or why there is none.
type domainPending struct {
	Domain string                       `json:"domain"`
	Error  *string                      `json:"error"`
	Alarms *adminv1.ListPendingResponse `json:"-"`
	Raw    json.RawMessage              `json:"alarms"`
}

// alarmsList shows each domain's totals and oldest overdue alarm. Asked for every domain (all),
// it leaves out the ones whose service keeps no alarms.
func (c *cli) alarmsList(ctx context.Context, domains []string, all bool, next int, shards, check bool, late time.Duration) error {
	var lines []domainPending
	var failed error
	for _, d := range domains {
		a, err := c.admin(d)
		if err != nil {
			return err
		}
		cctx, cancel := c.call(ctx)
		res, err := a.ListPending(cctx, &adminv1.ListPendingRequest{NextPerShard: int32(next)})
		cancel()
		// Asked for every domain: leave out those that keep no alarms (Unimplemented), or that
		// the gateway does not serve (NotFound).
		if c := status.Code(err); all && (c == codes.Unimplemented || c == codes.NotFound) {
			continue
		}
		line := domainPending{Domain: d, Alarms: res, Raw: msgJSON(res)}
		if err != nil {
			err = rpcError(d+" alarms", err)
			msg := err.Error()
			line.Error = &msg
			if failed == nil {
				failed = err
			}
		}
		lines = append(lines, line)
	}

	// The checks a monitoring script asks for: late beyond the limit, or anything dead.
	var problems []string
	for _, l := range lines {
		if l.Alarms == nil {
			continue
		}
		if o := l.Alarms.GetOldestOverdue(); o != nil && time.Duration(o.GetLateMs())*time.Millisecond > late {
			problems = append(problems, fmt.Sprintf("%s: alarm %q is %s late (%d overdue)", l.Domain, o.GetId(), dur(o.GetLateMs()), l.Alarms.GetOverdue()))
		}
		if n := l.Alarms.GetDead(); n > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d dead-lettered alarms (vigil alarms dead --domain %s)", l.Domain, n, l.Domain))
		}
	}

	if c.json {
		if err := c.printJSON(map[string]any{"domains": lines, "problems": append([]string{}, problems...)}); err != nil {
			return err
		}
	} else {
		var rows [][]string
		for _, l := range lines {
			if l.Alarms == nil {
				rows = append(rows, []string{l.Domain, "-", "-", "-", "-", "(" + *l.Error + ")", ""})
				continue
			}
			a := l.Alarms
			oldest, lateBy := "-", "-"
			if o := a.GetOldestOverdue(); o != nil {
				oldest, lateBy = o.GetId(), dur(o.GetLateMs())
			}
			rows = append(rows, []string{l.Domain, itoa(a.GetPending()), itoa(a.GetOverdue()), itoa(a.GetInFlight()), itoa(a.GetDead()), oldest, lateBy})
		}
		c.table([]string{"DOMAIN", "PENDING", "OVERDUE", "IN-FLIGHT", "DEAD", "OLDEST-OVERDUE", "LATE"}, rows)
		if shards {
			fmt.Fprintln(c.out)
			rows = nil
			for _, l := range lines {
				for _, s := range l.Alarms.GetShards() {
					if s.GetPending() == 0 && s.GetDead() == 0 {
						continue // an empty shard says nothing; --json lists every shard
					}
					var nexts []string
					for _, a := range s.GetNext() {
						n := a.GetId() + "@" + ms(a.GetDueAt())
						if a.GetInFlight() {
							n += fmt.Sprintf(" (in flight, attempt %d)", a.GetAttempts())
						}
						nexts = append(nexts, n)
					}
					rows = append(rows, []string{l.Domain, strconv.Itoa(int(s.GetShard())), itoa(s.GetPending()), itoa(s.GetOverdue()),
						itoa(s.GetInFlight()), itoa(s.GetDead()), strings.Join(nexts, ", ")})
				}
			}
			c.table([]string{"DOMAIN", "SHARD", "PENDING", "OVERDUE", "IN-FLIGHT", "DEAD", "NEXT"}, rows)
		}
	}
	if failed != nil {
		return failed
	}
	if check && len(problems) > 0 {
		return &exitError{exitRefused, errors.New("check failed: " + strings.Join(problems, "; "))}
	}
	return nil
}

// deadLine is one dead letter with its domain.
type deadLine struct {
	Domain string          `json:"domain"`
	Dead   json.RawMessage `json:"deadLetter"`
	d      *adminv1.DeadLetter
}

func (c *cli) listDead(ctx context.Context, domain string) ([]*adminv1.DeadLetter, error) {
	a, err := c.admin(domain)
	if err != nil {
		return nil, err
	}
	cctx, cancel := c.call(ctx)
	defer cancel()
	res, err := a.ListDeadLetters(cctx, &adminv1.ListDeadLettersRequest{})
	if err != nil {
		return nil, rpcError(domain+" dead letters", err)
	}
	return res.GetDeadLetters(), nil
}

// alarmsDead lists the dead letters of the domains, oldest first. Asked for every domain (all),
// it leaves out the ones whose service keeps no alarms.
func (c *cli) alarmsDead(ctx context.Context, domains []string, all bool) error {
	var lines []deadLine
	var failed []error
	for _, d := range domains {
		dead, err := c.listDead(ctx, d)
		if code, _ := opsExitCode(err); all && code == exitNotFound {
			continue
		}
		if err != nil {
			failed = append(failed, err)
			continue
		}
		for _, x := range dead {
			lines = append(lines, deadLine{Domain: d, Dead: msgJSON(x), d: x})
		}
	}
	slices.SortStableFunc(lines, func(a, b deadLine) int { return cmp.Compare(a.d.GetDeadAt(), b.d.GetDeadAt()) })
	if c.json {
		if err := c.printJSON(map[string]any{"deadLetters": append([]deadLine{}, lines...)}); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(lines))
		for _, l := range lines {
			rows = append(rows, []string{l.Domain, l.d.GetId(), strconv.Itoa(int(l.d.GetShard())), strconv.Itoa(int(l.d.GetAttempts())),
				ms(l.d.GetDeadAt()), l.d.GetError()})
		}
		c.table([]string{"DOMAIN", "ID", "SHARD", "ATTEMPTS", "DEAD-AT", "LAST-ERROR"}, rows)
	}
	for _, err := range failed[min(1, len(failed)):] {
		fmt.Fprintln(c.errOut, "vigil:", err)
	}
	if len(failed) > 0 {
		return failed[0] // main prints it
	}
	return nil
}

// alarmsSettle replays or discards dead letters one by one, showing progress; ids that are not
// dead letters are reported and make the exit status 3 once the rest are done.
func (c *cli) alarmsSettle(ctx context.Context, action, domain string, ids []string, all bool) error {
	a, err := c.admin(domain)
	if err != nil {
		return err
	}
	if all {
		dead, err := c.listDead(ctx, domain)
		if err != nil {
			return err
		}
		for _, d := range dead {
			ids = append(ids, d.GetId())
		}
	}
	verb := map[string]string{"replay": "replayed", "discard": "discarded"}[action]
	done := []string{}
	missing := []string{}
	p := c.progress(verb, len(ids))
	for i, id := range ids {
		cctx, cancel := c.call(ctx)
		if action == "replay" {
			_, err = a.ReplayDeadLetter(cctx, &adminv1.ReplayDeadLetterRequest{Id: id})
		} else {
			_, err = a.DiscardDeadLetter(cctx, &adminv1.DiscardDeadLetterRequest{Id: id})
		}
		cancel()
		switch {
		case status.Code(err) == codes.NotFound:
			missing = append(missing, id)
		case err != nil:
			return rpcError(fmt.Sprintf("%s %s", action, id), err)
		default:
			done = append(done, id)
		}
		p.step(i + 1)
	}
	if c.json {
		if err := c.printJSON(map[string]any{"domain": domain, verb: done, "notDead": missing}); err != nil {
			return err
		}
	} else {
		rows := make([][]string, 0, len(ids))
		for _, id := range done {
			rows = append(rows, []string{domain, id, verb})
		}
		for _, id := range missing {
			rows = append(rows, []string{domain, id, "not a dead letter"})
		}
		c.table([]string{"DOMAIN", "ID", "RESULT"}, rows)
	}
	if len(missing) > 0 {
		return &exitError{exitNotFound, fmt.Errorf("%d of %d ids had no dead letter in %s: %s", len(missing), len(ids), domain, strings.Join(missing, ", "))}
	}
	return nil
}

func (c *cli) alarmsGet(ctx context.Context, domain, id string) error {
	a, err := c.admin(domain)
	if err != nil {
		return err
	}
	cctx, cancel := c.call(ctx)
	defer cancel()
	res, err := a.LookupObject(cctx, &adminv1.LookupObjectRequest{Id: id})
	if err != nil {
		return rpcError("look up "+id, err)
	}
	if c.json {
		if err := c.printJSON(res); err != nil {
			return err
		}
	} else {
		c.printObject(res)
	}
	if !res.GetFound() && res.Alarm == nil && res.DeadLetter == nil {
		return &exitError{exitNotFound, fmt.Errorf("%s has no object, alarm or dead letter %q", domain, id)}
	}
	return nil
}

// printObject shows an object's fields, then its alarm and dead letter, as "key  value" lines.
func (c *cli) printObject(res *adminv1.LookupObjectResponse) {
	var rows [][]string
	add := func(k, v string) { rows = append(rows, []string{k, v}) }
	add("domain", res.GetNamespace())
	add("id", res.GetId())
	add("shard", strconv.Itoa(int(res.GetShard())))
	if !res.GetFound() {
		add("object", "none")
	}
	fields := res.GetObject().AsMap()
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		add(k, fieldText(k, fields[k]))
	}
	if a := res.GetAlarm(); a != nil {
		s := ms(a.GetDueAt())
		if a.GetInFlight() {
			s += fmt.Sprintf(" (in flight, attempt %d)", a.GetAttempts())
		}
		if a.GetLateMs() > 0 {
			s += ", " + dur(a.GetLateMs()) + " late"
		}
		add("alarm", s)
	} else {
		add("alarm", "none")
	}
	if d := res.GetDeadLetter(); d != nil {
		add("dead letter", fmt.Sprintf("since %s after %d attempts: %s", ms(d.GetDeadAt()), d.GetAttempts(), d.GetError()))
	}
	c.table([]string{"FIELD", "VALUE"}, rows)
}

// fieldText shows a JSON field for people: ms timestamps (fields ending in At) as times.
func fieldText(key string, v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case float64:
		if strings.HasSuffix(key, "At") || key == "lastActivity" {
			return ms(int64(x))
		}
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
