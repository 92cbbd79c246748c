package app

import (
	"encoding/json"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/vigil-dev/vigil/pkg/alarm"
	"github.com/vigil-dev/vigil/pkg/input"
)

// alarmLog writes the reservation-alarm lines: one JSON object per firing and phase, whose
// first keys are exactly the seed lab's {"event":"reservation-alarm","isRetry":...,
// "retryCount":...}, then
//
//	"phase"    "start" (before the transition), "done" (it ran) or "failed" (it did not)
//	"id"       the reservation id
//	"changed"  whether this firing expired the hold (done: true exactly once per hold;
//	           failed: false; absent on start, which does not know yet)
//	"delayMs"  how long after the alarm's due time the handler ran (its clock minus due)
//	"error"    why the transition failed (failed only)
//	"time"     the handler's clock when it took the batch (RFC 3339, UTC; the same on a
//	           firing's start and done lines)
//
// A batch's lines of one phase are encoded into one buffer and written in one call, so a drain
// of 100,000 holds costs two writes per claimed batch, not two per hold, and lines of batches
// handled at once never interleave.
type alarmLog struct {
	mu  sync.Mutex // one batch's lines at a time on w
	w   io.Writer
	buf []byte
}

func (l *alarmLog) start(batch []alarm.Firing, now time.Time) {
	l.write(batch, now, "start", func(b []byte, i int) []byte { return b })
}

func (l *alarmLog) done(batch []alarm.Firing, changed []bool, now time.Time) {
	l.write(batch, now, "done", func(b []byte, i int) []byte {
		return strconv.AppendBool(append(b, `,"changed":`...), changed[i])
	})
}

func (l *alarmLog) failed(batch []alarm.Firing, now time.Time, err error) {
	msg, _ := json.Marshal(err.Error())
	l.write(batch, now, "failed", func(b []byte, i int) []byte {
		return append(append(b, `,"changed":false,"error":`...), msg...)
	})
}

// write encodes one line per firing of batch: the common keys, then extra's, then the rest.
func (l *alarmLog) write(batch []alarm.Firing, now time.Time, phase string, extra func(b []byte, i int) []byte) {
	if l.w == io.Discard {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf[:0]
	stamp := now.UTC().AppendFormat(nil, time.RFC3339Nano)
	for i, f := range batch {
		b = append(b, `{"event":"reservation-alarm","isRetry":`...)
		b = strconv.AppendBool(b, f.IsRetry())
		b = append(b, `,"retryCount":`...)
		b = strconv.AppendInt(b, int64(f.RetryCount()), 10)
		b = append(b, `,"phase":"`...)
		b = append(b, phase...)
		b = append(b, '"')
		b = append(b, `,"id":`...)
		b = appendID(b, f.ID)
		b = extra(b, i)
		b = append(b, `,"delayMs":`...)
		b = strconv.AppendInt(b, now.Sub(f.Due).Milliseconds(), 10)
		b = append(b, `,"time":"`...)
		b = append(b, stamp...)
		b = append(b, "\"}\n"...)
	}
	_, _ = l.w.Write(b)
	l.buf = b
}

// appendID appends id as a JSON string. Ids are slugs (nothing to escape) unless something
// other than the service put an alarm in the queue.
func appendID(b []byte, id string) []byte {
	if input.IsSlug(id) {
		return append(append(append(b, '"'), id...), '"')
	}
	q, _ := json.Marshal(id)
	return append(b, q...)
}
