package store

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/vigil-dev/vigil/pkg/redisx"
)

// pipeliner sends script calls that arrive while others are on the wire together, in one
// pipeline: under load a handful of calls cost one write and one read instead of one round
// trip each (the same idea as rueidis's auto-pipelining). A call that finds the line idle goes
// out at once, so a lone caller pays nothing.
type pipeliner struct {
	rdb     redis.UniversalClient
	scripts []*redisx.Script
	// publish sends the grant notices of a batch's calls that succeeded, after the batch.
	publish func(ctx context.Context, notices []string)
	// max is how many pipelines may be in flight at once.
	max int

	mu      sync.Mutex
	pending []*scriptCall
	active  int
}

// scriptCall is one script run waiting for its pipeline.
type scriptCall struct {
	sc   *redisx.Script
	keys []string
	args []any
	res  []any
	err  error
	done chan struct{}
}

// callTimeout bounds one pipeline; a caller whose context ends stops waiting sooner.
const callTimeout = 10 * time.Second

// do runs the script and returns its reply as a slice, without the grant notices that end it:
// those are published once the whole batch has been answered, so a waiter never hears of a
// grant whose write failed (or whose durability wait did).
func (p *pipeliner) do(ctx context.Context, sc *redisx.Script, keys []string, args ...any) ([]any, error) {
	c := &scriptCall{sc: sc, keys: keys, args: args, done: make(chan struct{})}
	p.mu.Lock()
	p.pending = append(p.pending, c)
	var batch []*scriptCall
	if p.active < p.max {
		p.active++
		batch, p.pending = p.pending, nil
	}
	p.mu.Unlock()
	if batch != nil {
		p.flush(batch)
	}
	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		// The script may still run; every lock script is safe to have run unseen (a retried
		// acquire is idempotent, and a lease bounds an unseen grant).
		return nil, ctx.Err()
	}
}

// flush sends batch, then hands whatever queued meanwhile to a new flusher, so the caller
// that flushed is not held up by later calls.
func (p *pipeliner) flush(batch []*scriptCall) {
	p.exec(batch)
	p.mu.Lock()
	next := p.pending
	p.pending = nil
	if len(next) == 0 {
		p.active--
	}
	p.mu.Unlock()
	if len(next) > 0 {
		go p.flush(next)
	}
}

func (p *pipeliner) exec(batch []*scriptCall) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	defer func() {
		var notices []string
		for _, c := range batch {
			if c.err == nil {
				c.res, notices = splitNotices(c.res, notices)
			}
			close(c.done)
		}
		p.publish(ctx, notices)
	}()
	if len(batch) == 1 {
		c := batch[0]
		c.res, c.err = c.sc.Run(ctx, p.rdb, c.keys, c.args...).Slice()
		return
	}
	p.pipeline(ctx, batch, false)
	// Scripts missing on the server (Redis restarted, or a new cluster node): load them for
	// later pipelines and send again, as EVALs of the source (which cannot meet NOSCRIPT, even
	// if the server forgets its scripts once more meanwhile), only the calls that did not run,
	// so none runs twice.
	var again []*scriptCall
	for _, c := range batch {
		if redisx.IsNoScript(c.err) {
			again = append(again, c)
		}
	}
	if len(again) == 0 {
		return
	}
	for _, sc := range p.scripts {
		if err := sc.Load(ctx, p.rdb); err != nil {
			for _, c := range again {
				c.err = err
			}
			return
		}
	}
	p.pipeline(ctx, again, true)
}

// pipeline sends batch in one pipeline, by SHA, or (source) as EVALs of the scripts' source.
func (p *pipeliner) pipeline(ctx context.Context, batch []*scriptCall, source bool) {
	cmds := make([]*redis.Cmd, len(batch))
	_, _ = p.rdb.Pipelined(ctx, func(pl redis.Pipeliner) error {
		for i, c := range batch {
			if source {
				cmds[i] = c.sc.QueueSource(ctx, pl, c.keys, c.args...)
			} else {
				cmds[i] = c.sc.Queue(ctx, pl, c.keys, c.args...)
			}
		}
		return nil
	})
	for i, c := range batch {
		c.res, c.err = cmds[i].Slice()
	}
}
