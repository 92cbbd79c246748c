package store

import (
	"encoding/binary"
	"errors"
	"strconv"
	"strings"

	"github.com/vigil-dev/vigil/services/chat/internal/domain"
)

// A message is stored and published as: uvarint ts, then user id, user and body, each a
// uvarint length and its bytes. The id is the stream entry's id (or the published prefix), so
// it is not repeated.

var errCorrupt = errors.New("chat store: corrupt message encoding")

func encode(m domain.Message) string {
	b := make([]byte, 0, 3*binary.MaxVarintLen64+binary.MaxVarintLen64+len(m.UserID)+len(m.User)+len(m.Body))
	b = binary.AppendUvarint(b, uint64(m.TS))
	for _, s := range []string{m.UserID, m.User, m.Body} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	return string(b)
}

func decode(id int64, s string) (domain.Message, error) {
	m := domain.Message{ID: id}
	b := []byte(s)
	ts, n := binary.Uvarint(b)
	if n <= 0 {
		return m, errCorrupt
	}
	m.TS, b = int64(ts), b[n:]
	var fields [3]string
	for i := range fields {
		l, n := binary.Uvarint(b)
		if n <= 0 || uint64(len(b)-n) < l {
			return m, errCorrupt
		}
		fields[i], b = string(b[n:n+int(l)]), b[n+int(l):]
	}
	m.UserID, m.User, m.Body = fields[0], fields[1], fields[2]
	return m, nil
}

// decodePublished parses a channel payload, "<id>:<encoded message>".
func decodePublished(payload string) (domain.Message, error) {
	i := strings.IndexByte(payload, ':')
	if i <= 0 {
		return domain.Message{}, errCorrupt
	}
	id, err := strconv.ParseInt(payload[:i], 10, 64)
	if err != nil {
		return domain.Message{}, errCorrupt
	}
	return decode(id, payload[i+1:])
}

// entryID parses a stream entry id "<n>-0".
func entryID(s string) (int64, error) {
	if i := strings.IndexByte(s, '-'); i > 0 {
		s = s[:i]
	}
	return strconv.ParseInt(s, 10, 64)
}
