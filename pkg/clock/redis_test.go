package clock

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/vigil-dev/vigil/pkg/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// Against a real Redis, a base clock 30s ahead or behind is corrected: Redis's TIME, read
// between two readings of Now, lies between them give or take the error bound. The measured
// offset and round trip are logged (go test -v) for OPERATIONS.md.
func TestRedisTimeDisciplinesASkewedClock(t *testing.T) {
	t.Parallel()
	rdb, _ := redistest.Client(t)
	for _, skew := range []time.Duration{30 * time.Second, -30 * time.Second} {
		c, err := New(Options{Base: func() time.Time { return time.Now().Add(skew) }, Registerer: prometheus.NewRegistry()})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := c.Sync(ctx, RedisTime(rdb)); err != nil {
			t.Fatal(err)
		}
		for range 20 { // a few more, as Run would take them
			if err := c.Sample(ctx, RedisTime(rdb)); err != nil {
				t.Fatal(err)
			}
		}
		st := c.Status()
		before := c.Now()
		shared, err := rdb.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		after := c.Now()
		slack := st.Error + time.Microsecond // TIME's resolution
		if shared.Before(before.Add(-slack)) || shared.After(after.Add(slack)) {
			t.Errorf("base %+v: Redis TIME %v outside disciplined [%v, %v] ± %v", skew, shared, before, after, slack)
		}
		if d := st.Offset + skew; abs(d) > 50*time.Millisecond {
			t.Errorf("base %+v: Offset = %v, want about %v", skew, st.Offset, -skew)
		}
		if err := c.Check(); err == nil {
			t.Errorf("base %+v: Check = nil, want the offset named", skew)
		}
		t.Logf("base %+v: offset %v (host's own offset from Redis %v), error bound %v, best rtt %v of %d samples",
			skew, st.Offset, st.Offset+skew, st.Error, st.RTT, st.Samples)
	}
}
