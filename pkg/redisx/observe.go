package redisx

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/redis/go-redis/v9"
	"github.com/vigil-dev/vigil/pkg/prom"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/vigil-dev/vigil/pkg/tracing"
)

// Every client Open returns carries observeHook: it times each Lua script (the latency
// operators watch) and, while tracing is on, gives every command and pipeline a span under the
// caller's, named after the script it runs. Plain commands cost nothing extra with tracing off.

// scriptNames maps a script's SHA-1 (hex) to the name NewScript gave it.
var scriptNames sync.Map

// scriptHistogram is the script-latency histogram registered on reg (nil: the default
// registerer). A second client registering on the same reg gets the first one's histogram.
func scriptHistogram(reg prometheus.Registerer) (*prometheus.HistogramVec, error) {
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vigil_redis_script_duration_seconds",
		Help:    "Time from sending a Lua script to its answer, by script; a script sent in a pipeline counts the whole pipeline.",
		Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, 1},
	}, []string{"script"})
	h, err := prom.Register(reg, h)
	if err != nil {
		return nil, fmt.Errorf("redis metrics: %w", err)
	}
	return h, nil
}

// scriptOf is the name of the script cmd runs, or "" when cmd runs none.
func scriptOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	var sha string
	switch cmd.Name() {
	case "evalsha", "evalsha_ro":
		sha, _ = args[1].(string)
	case "eval", "eval_ro":
		src, _ := args[1].(string)
		sum := sha1.Sum([]byte(src))
		sha = hex.EncodeToString(sum[:])
	default:
		return ""
	}
	if name, ok := scriptNames.Load(sha); ok {
		return name.(string)
	}
	return "sha:" + sha[:min(8, len(sha))]
}

type observeHook struct {
	seconds *prometheus.HistogramVec
}

var _ redis.Hook = observeHook{}

func (observeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h observeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := scriptOf(cmd)
		traced := tracing.Enabled()
		if script == "" && !traced {
			return next(ctx, cmd)
		}
		start := time.Now()
		var span trace.Span
		if traced {
			name := "redis " + cmd.Name()
			if script != "" {
				name += " " + script
			}
			ctx, span = tracing.Tracer().Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", cmd.Name())))
		}
		err := next(ctx, cmd)
		if script != "" {
			h.seconds.WithLabelValues(script).Observe(time.Since(start).Seconds())
		}
		if span != nil {
			endSpan(span, err)
		}
		return err
	}
}

func (h observeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if resent(ctx) {
			// A single command the durability hook sends again as a pipeline: ProcessHook
			// already times it.
			return next(ctx, cmds)
		}
		var scripts []string
		for _, c := range cmds {
			if s := scriptOf(c); s != "" {
				scripts = append(scripts, s)
			}
		}
		traced := tracing.Enabled()
		if len(scripts) == 0 && !traced {
			return next(ctx, cmds)
		}
		start := time.Now()
		var span trace.Span
		if traced {
			ctx, span = tracing.Tracer().Start(ctx, "redis pipeline", trace.WithSpanKind(trace.SpanKindClient),
				trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.Int("db.operation.batch.size", len(cmds)),
					attribute.StringSlice("vigil.redis.scripts", distinct(scripts))))
		}
		err := next(ctx, cmds)
		took := time.Since(start).Seconds()
		for _, s := range scripts {
			h.seconds.WithLabelValues(s).Observe(took)
		}
		if span != nil {
			endSpan(span, err)
		}
		return err
	}
}

func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, redis.Nil) {
		span.RecordError(err)
		span.SetStatus(codes.Error, "redis error")
	}
	span.End()
}

func distinct(names []string) []string {
	seen := map[string]bool{}
	out := names[:0:0]
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
