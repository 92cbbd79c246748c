// Package jsonapi is the gateway's JSON dialect (docs/API.md): how every REST answer is written
// and every request body and integer query parameter is read, with the sentences that refuse
// bad input. It knows messages, never routes or backends: the sentences are passed in.
package jsonapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/vigil-dev/vigil/pkg/input"
)

// Dialect is the JSON dialect of docs/API.md on top of protojson: 64-bit integers (times
// in ms, counts, tokens) are JSON numbers rather than strings, unset optional fields are null,
// and request bodies are checked strictly (an integer field takes only a JSON integer, never a
// string or a fraction), with errors a person can act on.
type Dialect struct {
	// allowEmpty names request messages whose body may be empty (all their fields optional).
	allowEmpty map[protoreflect.FullName]bool
	// fieldErrors gives the sentence for a badly typed field, by the field's full name.
	fieldErrors map[protoreflect.FullName]string
}

var _ runtime.Marshaler = (*Dialect)(nil)

// Sentences tune the dialect for a set of request messages.
type Sentences struct {
	// AllowEmpty names request messages whose body may be empty (all their fields optional).
	AllowEmpty []protoreflect.FullName
	// FieldErrors gives the sentence for a badly typed field, by the field's full name.
	FieldErrors map[protoreflect.FullName]string
}

// New is the dialect with the sentences of every part given.
func New(parts ...Sentences) *Dialect {
	m := &Dialect{allowEmpty: map[protoreflect.FullName]bool{}, fieldErrors: map[protoreflect.FullName]string{}}
	for _, p := range parts {
		for _, n := range p.AllowEmpty {
			m.allowEmpty[n] = true
		}
		for n, msg := range p.FieldErrors {
			m.fieldErrors[n] = msg
		}
	}
	return m
}

// ErrSendJSON is the sentence for a body that is not JSON.
const ErrSendJSON = "Send a JSON request body."

func (m *Dialect) ContentType(any) string { return "application/json" }

func (m *Dialect) Marshal(v any) ([]byte, error) {
	msg, ok := v.(proto.Message)
	if !ok {
		return json.Marshal(v)
	}
	return Marshal(msg)
}

func (m *Dialect) Unmarshal(data []byte, v any) error {
	msg, ok := v.(proto.Message)
	if !ok {
		return json.Unmarshal(data, v)
	}
	return m.Decode(data, msg)
}

func (m *Dialect) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		if bb, ok := r.(interface{ Take() []byte }); ok {
			return m.Unmarshal(bb.Take(), v)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			return errors.New(ErrSendJSON)
		}
		return m.Unmarshal(data, v)
	})
}

func (m *Dialect) NewEncoder(w io.Writer) runtime.Encoder {
	return runtime.EncoderFunc(func(v any) error {
		b, err := m.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	})
}

// Decode reads a request body into msg, or refuses it with a sentence.
func (m *Dialect) Decode(data []byte, msg proto.Message) error {
	md := msg.ProtoReflect().Descriptor()
	if len(trimJSONSpace(data)) == 0 {
		if m.allowEmpty[md.FullName()] {
			return nil
		}
		return errors.New(ErrSendJSON)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	// Nothing but space may follow the value (Decoder.More is false before a stray "}").
	if err := dec.Decode(&v); err != nil || len(trimJSONSpace(data[dec.InputOffset():])) > 0 {
		return errors.New(ErrSendJSON)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return errors.New("Send a JSON object as the request body.")
	}
	if err := m.check(md, obj); err != nil {
		return err
	}
	if direct(md) {
		if !utf8.Valid(data) {
			return errors.New(ErrSendJSON) // protojson's rule: encoding/json would substitute U+FFFD
		}
		setMessage(msg.ProtoReflect(), obj)
		return nil
	}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, msg); err != nil {
		return errors.New(ErrSendJSON)
	}
	return nil
}

// trimJSONSpace trims what JSON counts as white space (space, tab, CR, LF), and nothing else:
// a vertical tab after the object is not JSON, and protojson refuses it too.
func trimJSONSpace(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }

// jsonField is the value obj gives fd, by its JSON name or its proto name (as protojson reads
// them); nil when obj has none or null.
func jsonField(obj map[string]any, fd protoreflect.FieldDescriptor) any {
	if val, ok := obj[fd.JSONName()]; ok {
		return val
	}
	return obj[string(fd.Name())]
}

// check verifies the JSON types of the fields obj sets, recursively.
func (m *Dialect) check(md protoreflect.MessageDescriptor, obj map[string]any) error {
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		val := jsonField(obj, fd)
		if val == nil {
			continue
		}
		if fd.IsList() {
			arr, isArr := val.([]any)
			if !isArr {
				return m.fieldError(fd, "a JSON array")
			}
			for _, e := range arr {
				if err := m.checkValue(fd, e); err != nil {
					return err
				}
			}
			continue
		}
		if fd.IsMap() {
			if _, isObj := val.(map[string]any); !isObj {
				return m.fieldError(fd, "a JSON object")
			}
			continue
		}
		if err := m.checkValue(fd, val); err != nil {
			return err
		}
	}
	return nil
}

func (m *Dialect) checkValue(fd protoreflect.FieldDescriptor, val any) error {
	switch fd.Kind() {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		// Only a plain JSON integer within ±MaxSafeInt: 9007199254740993 is refused, never
		// rounded to ...992 the way a JavaScript client (or a float64) would read it.
		n, ok := val.(json.Number)
		if !ok {
			return m.intError(fd)
		}
		v, ok := strictInt(n)
		if !ok || input.SafeInt(fd.JSONName(), v) != nil {
			return m.intError(fd)
		}
		if kindUnsigned(fd.Kind()) && v < 0 {
			return m.intError(fd)
		}
		if kind32(fd.Kind()) && (v < math.MinInt32 || v > math.MaxUint32 || (!kindUnsigned(fd.Kind()) && v > math.MaxInt32)) {
			return m.intError(fd)
		}
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		if _, ok := val.(json.Number); !ok {
			return m.fieldError(fd, "a number")
		}
	case protoreflect.BoolKind:
		if _, ok := val.(bool); !ok {
			return m.fieldError(fd, "true or false")
		}
	case protoreflect.EnumKind:
		if _, ok := scalar(fd, val); !ok {
			return m.fieldError(fd, "one of its names")
		}
	case protoreflect.StringKind:
		if _, ok := val.(string); !ok {
			return m.fieldError(fd, "a string")
		}
	case protoreflect.MessageKind:
		if strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
			return nil
		}
		obj, ok := val.(map[string]any)
		if !ok {
			return m.fieldError(fd, "a JSON object")
		}
		return m.check(fd.Message(), obj)
	}
	return nil
}

// intError is the sentence for an integer field that got something else: the field's own, or
// the safe-integer range.
func (m *Dialect) intError(fd protoreflect.FieldDescriptor) error {
	if msg, ok := m.fieldErrors[fd.FullName()]; ok {
		return errors.New(msg)
	}
	lo, hi := int64(-input.MaxSafeInt), int64(input.MaxSafeInt)
	switch {
	case kind32(fd.Kind()) && kindUnsigned(fd.Kind()):
		lo, hi = 0, math.MaxUint32
	case kind32(fd.Kind()):
		lo, hi = math.MinInt32, math.MaxInt32
	case kindUnsigned(fd.Kind()):
		lo = 0
	}
	return input.Int(fd.JSONName(), hi+1, lo, hi)
}

func kind32(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind, protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return true
	}
	return false
}

func kindUnsigned(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

// CheckQuery checks a request's integer query parameters (limit, before, since, knownVersion)
// against msg's fields with the body's rules: 9007199254740993 or "1e3" is refused with the
// field's sentence, never a value the service has to guess about.
func (m *Dialect) CheckQuery(msg proto.Message, values url.Values) error {
	fields := msg.ProtoReflect().Descriptor().Fields()
	for key, vs := range values {
		fd := fields.ByJSONName(key)
		if fd == nil {
			fd = fields.ByName(protoreflect.Name(key))
		}
		if fd == nil || !IntKind(fd.Kind()) {
			continue
		}
		for _, v := range vs {
			if err := m.checkValue(fd, json.Number(v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// IntKind reports whether k is an integer kind, which the dialect reads as a strict integer.
func IntKind(k protoreflect.Kind) bool {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return true
	}
	return false
}

func (m *Dialect) fieldError(fd protoreflect.FieldDescriptor, want string) error {
	if msg, ok := m.fieldErrors[fd.FullName()]; ok {
		return errors.New(msg)
	}
	return fmt.Errorf("%s must be %s.", fd.JSONName(), want)
}

// Marshal renders msg in the API's JSON dialect: directly (fast.go) when its fields allow,
// else through protojson.
func Marshal(msg proto.Message) ([]byte, error) {
	m := msg.ProtoReflect()
	if direct(m.Descriptor()) {
		return appendMessage(make([]byte, 0, 256), m), nil
	}
	return marshalViaProtojson(msg)
}

// marshalViaProtojson renders msg as protojson with every field present, then turns 64-bit
// integers back into JSON numbers and unset optional fields into null.
func marshalViaProtojson(msg proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(numbersAndNulls(msg.ProtoReflect().Descriptor(), v))
}

func numbersAndNulls(md protoreflect.MessageDescriptor, v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := fd.JSONName()
		val, present := obj[name]
		switch {
		case !present || val == nil:
			if !fd.IsList() && !fd.IsMap() {
				obj[name] = nil
			}
		case fd.IsList():
			if arr, ok := val.([]any); ok {
				for j := range arr {
					arr[j] = fieldValue(fd, arr[j])
				}
			}
		case fd.IsMap():
			if mo, ok := val.(map[string]any); ok {
				for k := range mo {
					mo[k] = fieldValue(fd.MapValue(), mo[k])
				}
			}
		default:
			obj[name] = fieldValue(fd, val)
		}
	}
	return obj
}

func fieldValue(fd protoreflect.FieldDescriptor, v any) any {
	switch fd.Kind() {
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		if s, ok := v.(string); ok {
			return json.Number(s)
		}
	case protoreflect.MessageKind:
		if !strings.HasPrefix(string(fd.Message().FullName()), "google.protobuf.") {
			return numbersAndNulls(fd.Message(), v)
		}
	}
	return v
}

// strictInt is n when it is written as a plain integer (no fraction, no exponent) that fits
// an int64: the one rule every integer the gateway reads follows.
func strictInt(n json.Number) (int64, bool) {
	if strings.ContainsAny(n.String(), ".eE") {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

// Int reads raw, one JSON value, as a strict integer: a JSON number written as a plain integer
// that fits an int64; never a string ("5"), a fraction or an exponent.
func Int(raw json.RawMessage) (int64, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false // json.Number would also take "5", a string
	}
	var n json.Number
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return strictInt(n)
}
