package transport

import (
	"sync"

	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	lobbyv1 "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"

	// Registers the standard "proto" codec this one wraps.
	_ "google.golang.org/grpc/encoding/proto"
)

// listCodec is the lobby server's codec: gRPC's protobuf codec, except that it keeps the wire
// form of the last room list it encoded. Until the lobby changes, ListRooms answers with the
// very same shared list (see ListRooms), so 10,000 rooms are encoded once per change instead
// of once per listing.
type listCodec struct {
	base encoding.CodecV2

	mu      sync.Mutex
	first   **lobbyv1.Room // identity of the list: its backing array and length
	n       int
	version int64
	wire    []byte
}

// Codec returns the codec to serve the lobby with (grpc.ForceServerCodecV2).
func Codec() encoding.CodecV2 {
	return &listCodec{base: encoding.GetCodecV2("proto")}
}

// Marshal implements encoding.CodecV2.
func (c *listCodec) Marshal(v any) (mem.BufferSlice, error) {
	res, ok := v.(*lobbyv1.ListRoomsResponse)
	if !ok || len(res.GetRooms()) == 0 {
		return c.base.Marshal(v)
	}
	first := &res.Rooms[0]
	c.mu.Lock()
	if c.first == first && c.n == len(res.Rooms) && c.version == res.GetVersion() {
		wire := c.wire
		c.mu.Unlock()
		// A SliceBuffer is not pooled: gRPC's Free of it is a no-op, so it can be sent again.
		return mem.BufferSlice{mem.SliceBuffer(wire)}, nil
	}
	c.mu.Unlock()
	wire, err := proto.Marshal(res)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.first, c.n, c.version, c.wire = first, len(res.Rooms), res.GetVersion(), wire
	c.mu.Unlock()
	return mem.BufferSlice{mem.SliceBuffer(wire)}, nil
}

// Unmarshal implements encoding.CodecV2.
func (c *listCodec) Unmarshal(data mem.BufferSlice, v any) error { return c.base.Unmarshal(data, v) }

// Name implements encoding.CodecV2: it is the protobuf codec on the wire.
func (c *listCodec) Name() string { return c.base.Name() }
