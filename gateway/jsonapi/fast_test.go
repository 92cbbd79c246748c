package jsonapi

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	reservationsv1 "github.com/vigil-dev/vigil/pkg/api/vigil/reservations/v1"

	// Every API the gateway serves, so the registry holds all their messages.
	_ "github.com/vigil-dev/vigil/pkg/api/vigil/admin/v1"
	_ "github.com/vigil-dev/vigil/pkg/api/vigil/chat/v1"
	_ "github.com/vigil-dev/vigil/pkg/api/vigil/lobby/v1"
	_ "github.com/vigil-dev/vigil/pkg/api/vigil/locks/v1"
	_ "github.com/vigil-dev/vigil/pkg/api/vigil/room/v1"
)

var fillStrings = []string{"", "a", "orders/42", "日報", "<b>&amp;</b>", "quote\"back\\slash", "line\nbreak\ttab", "\u2028", "x\x00y", "emoji 😀"}
var fillInts = []int64{0, 1, -1, 42, 1 << 31, -(1 << 31), 9007199254740991, -9007199254740991, 1 << 62}

// fill sets every field of m with r's choices: optional and message fields set or not, lists of
// 0-2 elements.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.ContainingOneof() != nil && !fd.HasOptionalKeyword() && r.IntN(2) == 0 {
			continue
		}
		if fd.HasPresence() && r.IntN(3) == 0 {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(3) {
				if fd.Kind() == protoreflect.MessageKind {
					if depth < 3 {
						el := l.NewElement()
						fill(r, el.Message(), depth+1)
						l.Append(el)
					}
				} else {
					l.Append(fillValue(r, fd))
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(3) {
				k := protoreflect.ValueOfString(fillStrings[r.IntN(len(fillStrings))]).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					el := mp.NewValue()
					fill(r, el.Message(), depth+1)
					mp.Set(k, el)
				} else {
					mp.Set(k, fillValue(r, fd.MapValue()))
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			if depth < 3 {
				fill(r, m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, fillValue(r, fd))
		}
	}
}

func fillValue(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	n := fillInts[r.IntN(len(fillInts))]
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 0)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fillStrings[r.IntN(len(fillStrings))])
	case protoreflect.EnumKind:
		vs := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vs.Get(r.IntN(vs.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(n))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(n))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(n))
	}
	return protoreflect.ValueOfInt64(n)
}

// TestFastJSONMatchesProtojson: for every message of Vigil's APIs that takes the direct path,
// filled many ways, the direct rendering is byte for byte the protojson round trip's, and
// decoding it directly gives what protojson decodes.
func TestFastJSONMatchesProtojson(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var checked, compared int
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		md := mt.Descriptor()
		if md.ParentFile().Package() == "google.protobuf" || !direct(md) || string(md.FullName())[:6] != "vigil." {
			return true
		}
		checked++
		for range 50 {
			msg := mt.New()
			fill(r, msg, 0)
			got := appendMessage(nil, msg)
			want, err := marshalViaProtojson(msg.Interface())
			if err != nil {
				t.Fatalf("%s: protojson: %v", md.FullName(), err)
			}
			if string(got) != string(want) {
				t.Fatalf("%s renders\n%s\nwant\n%s", md.FullName(), got, want)
			}
			back := mt.New().Interface()
			ref := mt.New().Interface()
			if err := protojson.Unmarshal(want, ref); err != nil {
				t.Fatalf("%s: protojson cannot read %s: %v", md.FullName(), want, err)
			}
			m := New()
			if err := m.Unmarshal(want, back); err != nil {
				// Refused for a range the API narrows (an int beyond 2^53): protojson would take it.
				continue
			}
			compared++
			if !proto.Equal(back, ref) {
				t.Fatalf("%s: decoding %s gives %v, protojson %v", md.FullName(), want, back, ref)
			}
		}
		return true
	})
	if checked < 20 || compared < 500 {
		t.Errorf("checked %d message types and %d decodings, want every API message, most decoded", checked, compared)
	}
}

// BenchmarkJSONDialect is one REST round of the dialect: decode a create request, render a
// reservation.
func BenchmarkJSONDialect(b *testing.B) {
	m := New()
	body := []byte(`{"ttlSeconds": 30}`)
	res := &reservationsv1.Reservation{ReservationId: "seat-12a", Status: "held", CreatedAt: proto.Int64(1764400000123),
		ExpiresAt: proto.Int64(1764400030123), AlarmAt: proto.Int64(1764400030123)}
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Unmarshal(body, &reservationsv1.CreateReservationRequest{}); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Marshal(res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenderReservation compares the direct rendering with the protojson round trip it
// replaces.
func BenchmarkRenderReservation(b *testing.B) {
	res := &reservationsv1.Reservation{ReservationId: "seat-12a", Status: "held", CreatedAt: proto.Int64(1764400000123),
		ExpiresAt: proto.Int64(1764400030123), AlarmAt: proto.Int64(1764400030123)}
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = Marshal(res)
		}
	})
	b.Run("protojson", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = marshalViaProtojson(res)
		}
	})
}

// FuzzMarshalMatchesProtojson: any message of the APIs, as any wire bytes decode it, renders
// byte for byte as protojson renders it with the dialect's two changes (64-bit integers as
// numbers, unset optional fields as null), and what it renders reads back the same.
func FuzzMarshalMatchesProtojson(f *testing.F) {
	var types []protoreflect.MessageType
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		if md := mt.Descriptor(); string(md.FullName())[:6] == "vigil." && direct(md) {
			types = append(types, mt)
		}
		return true
	})
	slices.SortFunc(types, func(a, b protoreflect.MessageType) int {
		return strings.Compare(string(a.Descriptor().FullName()), string(b.Descriptor().FullName()))
	})
	r := rand.New(rand.NewPCG(3, 4))
	for i, mt := range types {
		m := mt.New()
		fill(r, m, 0)
		b, _ := proto.Marshal(m.Interface())
		f.Add(uint16(i), b)
	}
	f.Fuzz(func(t *testing.T, which uint16, wire []byte) {
		mt := types[int(which)%len(types)]
		msg := mt.New().Interface()
		if proto.Unmarshal(wire, msg) != nil {
			return
		}
		got, err := Marshal(msg)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", msg, err)
		}
		want, err := marshalViaProtojson(msg)
		if err != nil {
			return // protojson refuses it too (invalid UTF-8 in a string)
		}
		if string(got) != string(want) {
			t.Fatalf("%s renders\n%s\nprotojson with the dialect's changes\n%s", mt.Descriptor().FullName(), got, want)
		}
	})
}
