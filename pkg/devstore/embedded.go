package devstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// SnapshotFile is the embedded store's data file inside the data directory.
const SnapshotFile = "embedded.json"

// SaveEvery is how often the embedded store writes its data when it changed: a crash (a kill,
// a power cut) loses at most the writes of the last SaveEvery; a clean stop loses nothing.
const SaveEvery = time.Second

// dumpScript reads every key of the database with its type, value and remaining TTL in one
// script, so that a snapshot is never torn across the keys one script of a service wrote.
// Returns a JSON array of {k, t, v, pttl}.
const dumpScript = `
local out = {}
for _, k in ipairs(redis.call('KEYS', '*')) do
  local t = redis.call('TYPE', k)
  if type(t) == 'table' then t = t.ok or t.type end
  local e = {k = k, t = t, pttl = redis.call('PTTL', k)}
  if t == 'string' then e.v = redis.call('GET', k)
  elseif t == 'hash' then e.v = redis.call('HGETALL', k)
  elseif t == 'set' then e.v = redis.call('SMEMBERS', k)
  elseif t == 'zset' then e.v = redis.call('ZRANGE', k, 0, -1, 'WITHSCORES')
  elseif t == 'list' then e.v = redis.call('LRANGE', k, 0, -1)
  elseif t == 'stream' then e.v = redis.call('XRANGE', k, '-', '+')
  end
  out[#out + 1] = e
end
if #out == 0 then return '[]' end
return cjson.encode(out)
`

// snapshot is the data file: every key at SavedAt (ms since the epoch).
type snapshot struct {
	Version int     `json:"version"`
	SavedAt int64   `json:"savedAt"`
	Keys    []entry `json:"keys"`
}

// entry is one key: its type, value (a string, or a flat array; a stream is [[id, [f, v…]]…])
// and its TTL in ms at SavedAt (-1 for none).
type entry struct {
	Key   string          `json:"k"`
	Type  string          `json:"t"`
	Value json.RawMessage `json:"v"`
	PTTL  int64           `json:"pttl"`
}

// embedded is a miniredis kept in a file: loaded at start, written every SaveEvery when it
// changed, and on Close.
type embedded struct {
	m      *miniredis.Miniredis
	client *redis.Client
	path   string
	log    *slog.Logger
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	last   []byte // the last snapshot written, to skip rewriting an unchanged one
}

// openEmbedded starts miniredis with the data of dir/SnapshotFile, if there is one.
func openEmbedded(dir string, log *slog.Logger) (*embedded, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	m := miniredis.NewMiniRedis()
	// Keys with a TTL expire as the clock runs, as in Redis (miniredis's default is to wait for
	// FastForward).
	m.ClockTTL(true)
	e := &embedded{m: m, path: filepath.Join(abs, SnapshotFile), log: log, stop: make(chan struct{}), done: make(chan struct{})}
	if err := e.load(); err != nil {
		return nil, err
	}
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded Redis: %w", err)
	}
	e.client = redis.NewClient(&redis.Options{Addr: m.Addr()})
	go e.run()
	return e, nil
}

// load restores the data file into the store. A key whose TTL ran out while Vigil was stopped
// is not restored; the others keep what was left of their TTL.
func (e *embedded) load() error {
	data, err := os.ReadFile(e.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", e.path, err)
	}
	var s snapshot
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("%s is not an embedded store snapshot (%v); move it away to start empty", e.path, err)
	}
	stopped := time.Since(time.UnixMilli(s.SavedAt))
	for _, k := range s.Keys {
		if err := e.restore(k); err != nil {
			return fmt.Errorf("%s: key %q: %w", e.path, k.Key, err)
		}
		if k.PTTL >= 0 {
			left := time.Duration(k.PTTL)*time.Millisecond - stopped
			if left <= 0 {
				e.m.Del(k.Key)
				continue
			}
			e.m.SetTTL(k.Key, left)
		}
	}
	e.last = data
	return nil
}

func (e *embedded) restore(k entry) error {
	if k.Type == "string" {
		var v string
		if err := json.Unmarshal(k.Value, &v); err != nil {
			return err
		}
		return e.m.Set(k.Key, v)
	}
	if k.Type == "stream" {
		var items [][]json.RawMessage
		if err := json.Unmarshal(k.Value, &items); err != nil {
			return err
		}
		for _, it := range items {
			var id string
			var fields []string
			if len(it) != 2 || json.Unmarshal(it[0], &id) != nil || json.Unmarshal(it[1], &fields) != nil {
				return errors.New("a stream entry is not [id, [field, value, …]]")
			}
			if _, err := e.m.XAdd(k.Key, id, fields); err != nil {
				return err
			}
		}
		return nil
	}
	var vs []string
	if err := json.Unmarshal(k.Value, &vs); err != nil {
		return err
	}
	switch k.Type {
	case "hash":
		e.m.HSet(k.Key, vs...)
	case "set":
		_, err := e.m.SetAdd(k.Key, vs...)
		return err
	case "list":
		_, err := e.m.Push(k.Key, vs...)
		return err
	case "zset":
		for i := 0; i+1 < len(vs); i += 2 {
			score, err := strconv.ParseFloat(vs[i+1], 64)
			if err != nil {
				return err
			}
			if _, err := e.m.ZAdd(k.Key, score, vs[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("type %q is not kept by the embedded store", k.Type)
	}
	return nil
}

// run saves every SaveEvery until Close.
func (e *embedded) run() {
	defer close(e.done)
	tick := time.NewTicker(SaveEvery)
	defer tick.Stop()
	for {
		select {
		case <-e.stop:
			return
		case <-tick.C:
			if err := e.save(); err != nil {
				e.log.Warn("embedded store not saved", "event", "devstore_save_error", "file", e.path, "err", err)
			}
		}
	}
}

// save writes the store's data when it changed: to a temporary file, synced, then renamed over
// the data file, so a crash mid-write leaves the previous snapshot whole.
func (e *embedded) save() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	now := time.Now()
	raw, err := e.client.Eval(ctx, dumpScript, nil).Text()
	if err != nil {
		return err
	}
	var keys []entry
	if err := json.Unmarshal([]byte(raw), &keys); err != nil {
		return fmt.Errorf("decode dump: %w", err)
	}
	data, err := json.Marshal(snapshot{Version: 1, SavedAt: now.UnixMilli(), Keys: keys})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if sameKeys(e.last, keys) {
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(e.path), SnapshotFile+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), e.path); err != nil {
		return err
	}
	e.last = data
	return nil
}

// sameKeys reports whether keys hold the same data as the snapshot last (TTLs aside, which
// tick down on their own).
func sameKeys(last []byte, keys []entry) bool {
	if last == nil {
		return false
	}
	var prev snapshot
	if json.Unmarshal(last, &prev) != nil || len(prev.Keys) != len(keys) {
		return false
	}
	for i := range keys {
		a, b := prev.Keys[i], keys[i]
		if a.Key != b.Key || a.Type != b.Type || string(a.Value) != string(b.Value) || (a.PTTL < 0) != (b.PTTL < 0) {
			return false
		}
	}
	return true
}

// close writes the data a last time and stops the store.
func (e *embedded) close() error {
	close(e.stop)
	<-e.done
	err := e.save()
	_ = e.client.Close()
	e.m.Close()
	return err
}
