package jsonapi

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// The JSON dialect without a detour. protojson renders 64-bit integers as strings and omits
// nothing we want null, so Marshal used to render protojson, parse it back into a map, fix the
// map and render it again (three passes), and decode used to parse a body into a map for the
// type check and then again with protojson. For the messages the REST routes carry (scalars,
// strings, enums, nested messages, lists and maps of those) appendMessage writes the JSON in one
// pass straight from the message, and setMessage fills the message from the map the type check
// already parsed. Messages holding anything else (google.protobuf types, floats, bytes) keep the
// protojson path. The output is byte for byte what the old path wrote (sorted keys, null for
// unset optional fields, encoding/json's string escaping); TestFastJSONMatchesProtojson holds
// them together.

// direct reports whether md and every message it holds can take the direct path.
func direct(md protoreflect.MessageDescriptor) bool {
	if v, ok := directCache.Load(md.FullName()); ok {
		return v.(bool)
	}
	ok := directCheck(md, map[protoreflect.FullName]bool{})
	directCache.Store(md.FullName(), ok)
	return ok
}

var directCache sync.Map // protoreflect.FullName -> bool

func directCheck(md protoreflect.MessageDescriptor, seen map[protoreflect.FullName]bool) bool {
	if seen[md.FullName()] {
		return true
	}
	seen[md.FullName()] = true
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.IsMap() {
			if fd.MapKey().Kind() != protoreflect.StringKind || !directKind(fd.MapValue(), seen) {
				return false
			}
			continue
		}
		if !directKind(fd, seen) {
			return false
		}
	}
	return true
}

func directKind(fd protoreflect.FieldDescriptor, seen map[protoreflect.FullName]bool) bool {
	switch fd.Kind() {
	case protoreflect.FloatKind, protoreflect.DoubleKind, protoreflect.BytesKind, protoreflect.GroupKind:
		return false
	case protoreflect.MessageKind:
		m := fd.Message()
		if m.ParentFile().Package() == "google.protobuf" {
			return false
		}
		return directCheck(m, seen)
	}
	return true
}

// jsonFields are a message's fields sorted by JSON name, the order the map round trip wrote.
func jsonFields(md protoreflect.MessageDescriptor) []protoreflect.FieldDescriptor {
	if v, ok := fieldOrder.Load(md.FullName()); ok {
		return v.([]protoreflect.FieldDescriptor)
	}
	fields := md.Fields()
	out := make([]protoreflect.FieldDescriptor, fields.Len())
	for i := range out {
		out[i] = fields.Get(i)
	}
	slices.SortFunc(out, func(a, b protoreflect.FieldDescriptor) int { return strings.Compare(a.JSONName(), b.JSONName()) })
	fieldOrder.Store(md.FullName(), out)
	return out
}

var fieldOrder sync.Map // protoreflect.FullName -> []protoreflect.FieldDescriptor

// appendMessage appends m as the API's JSON: every field, unset optional fields and unset
// messages as null, empty lists as [], empty maps as {}.
func appendMessage(b []byte, m protoreflect.Message) []byte {
	b = append(b, '{')
	for i, fd := range jsonFields(m.Descriptor()) {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, fd.JSONName())
		b = append(b, ':')
		switch {
		case fd.IsList():
			l := m.Get(fd).List()
			b = append(b, '[')
			for j := range l.Len() {
				if j > 0 {
					b = append(b, ',')
				}
				b = appendValue(b, fd, l.Get(j))
			}
			b = append(b, ']')
		case fd.IsMap():
			mp := m.Get(fd).Map()
			keys := make([]string, 0, mp.Len())
			mp.Range(func(k protoreflect.MapKey, _ protoreflect.Value) bool {
				keys = append(keys, k.String())
				return true
			})
			slices.Sort(keys)
			b = append(b, '{')
			for j, k := range keys {
				if j > 0 {
					b = append(b, ',')
				}
				b = AppendString(b, k)
				b = append(b, ':')
				b = appendValue(b, fd.MapValue(), mp.Get(protoreflect.ValueOfString(k).MapKey()))
			}
			b = append(b, '}')
		case fd.HasPresence() && !m.Has(fd):
			b = append(b, "null"...)
		default:
			b = appendValue(b, fd, m.Get(fd))
		}
	}
	return append(b, '}')
}

func appendValue(b []byte, fd protoreflect.FieldDescriptor, v protoreflect.Value) []byte {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return strconv.AppendBool(b, v.Bool())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return strconv.AppendInt(b, v.Int(), 10)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return strconv.AppendUint(b, v.Uint(), 10)
	case protoreflect.StringKind:
		return AppendString(b, v.String())
	case protoreflect.EnumKind:
		if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
			return AppendString(b, string(ev.Name()))
		}
		return strconv.AppendInt(b, int64(v.Enum()), 10)
	case protoreflect.MessageKind:
		return appendMessage(b, v.Message())
	}
	return append(b, "null"...)
}

// AppendString appends s as a JSON string, as encoding/json writes it: plain when nothing needs
// escaping, else through encoding/json itself (HTML-safe escapes, invalid UTF-8 as U+FFFD).
// Every hand-written JSON answer of the gateway writes its strings with it.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c >= utf8.RuneSelf {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// setMessage fills m from obj, a JSON object check has already accepted for m's descriptor:
// the types are right, integers are in range. Unknown keys are ignored and null leaves a field
// unset, as protojson does.
func setMessage(m protoreflect.Message, obj map[string]any) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		val := jsonField(obj, fd)
		if val == nil {
			continue
		}
		switch {
		case fd.IsList():
			l := m.Mutable(fd).List()
			for _, e := range val.([]any) {
				if fd.Kind() == protoreflect.MessageKind {
					el := l.NewElement()
					setMessage(el.Message(), e.(map[string]any))
					l.Append(el)
				} else if v, ok := scalar(fd, e); ok {
					l.Append(v)
				}
			}
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for k, e := range val.(map[string]any) {
				key := protoreflect.ValueOfString(k).MapKey()
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					el := mp.NewValue()
					if o, ok := e.(map[string]any); ok {
						setMessage(el.Message(), o)
					}
					mp.Set(key, el)
				} else if v, ok := scalar(fd.MapValue(), e); ok {
					mp.Set(key, v)
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			setMessage(m.Mutable(fd).Message(), val.(map[string]any))
		default:
			if v, ok := scalar(fd, val); ok {
				m.Set(fd, v)
			}
		}
	}
}

// scalar converts a checked JSON value to fd's kind.
func scalar(fd protoreflect.FieldDescriptor, v any) (protoreflect.Value, bool) {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		b, ok := v.(bool)
		return protoreflect.ValueOfBool(b), ok
	case protoreflect.StringKind:
		s, ok := v.(string)
		return protoreflect.ValueOfString(s), ok
	case protoreflect.EnumKind:
		switch e := v.(type) {
		case string:
			if ev := fd.Enum().Values().ByName(protoreflect.Name(e)); ev != nil {
				return protoreflect.ValueOfEnum(ev.Number()), true
			}
		case json.Number:
			if n, err := e.Int64(); err == nil {
				return protoreflect.ValueOfEnum(protoreflect.EnumNumber(n)), true
			}
		}
		return protoreflect.Value{}, false
	}
	n, ok := v.(json.Number)
	if !ok {
		return protoreflect.Value{}, false
	}
	i, err := n.Int64()
	if err != nil {
		return protoreflect.Value{}, false
	}
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(i)), true
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(i), true
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(uint32(i)), true
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(uint64(i)), true
	}
	return protoreflect.Value{}, false
}
