package storebytes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// How kube-apiserver stores a value in etcd.
var (
	// protobufPrefix starts a value stored as protobuf: a runtime.Unknown
	// (typeMeta = 1, raw = 2) follows, raw being the object, whose
	// metadata is field 1 in every Kubernetes type.
	protobufPrefix = []byte("k8s\x00")
	// encryptedPrefix starts a value encrypted at rest
	// (k8s:enc:PROVIDER:v1:KEY:...): its kind cannot be read.
	encryptedPrefix = []byte("k8s:enc:")
)

// Protobuf field numbers (k8s.io/apimachinery's generated.proto files).
const (
	unknownTypeMeta   protowire.Number = 1 // runtime.Unknown.typeMeta
	unknownRaw        protowire.Number = 2 // runtime.Unknown.raw
	typeMetaKind      protowire.Number = 2 // runtime.TypeMeta.kind
	objectMetadata    protowire.Number = 1 // every top-level type's metadata
	metaManagedFields protowire.Number = 17
)

// Value is what one stored value is, as far as sizing goes.
type Value struct {
	Kind string // the object's kind, or "encrypted" when it cannot be read
	// WithoutManagedFields is the value's size with metadata.managedFields
	// left out, encoded as kube-apiserver encodes it.
	WithoutManagedFields int
}

// Decode reads a value as kube-apiserver wrote it: protobuf (built-in
// types), JSON (custom resources) or encrypted at rest.
func Decode(value []byte) (Value, error) {
	switch {
	case bytes.HasPrefix(value, protobufPrefix):
		return decodeProtobuf(value)
	case bytes.HasPrefix(value, encryptedPrefix):
		return Value{Kind: "encrypted", WithoutManagedFields: len(value)}, nil
	case len(value) > 0 && value[0] == '{':
		return decodeJSON(value)
	}
	return Value{}, errors.New("neither protobuf (k8s\\x00...), JSON nor encrypted (k8s:enc:...)")
}

func decodeProtobuf(value []byte) (Value, error) {
	unknown := value[len(protobufPrefix):]
	var kind string
	stripped, err := rewriteField(unknown, func(num protowire.Number, field []byte) ([]byte, error) {
		switch num {
		case unknownTypeMeta:
			k, err := stringField(field, typeMetaKind)
			kind = k
			return field, err
		case unknownRaw:
			return rewriteField(field, func(num protowire.Number, field []byte) ([]byte, error) {
				if num != objectMetadata {
					return field, nil
				}
				return dropField(field, metaManagedFields)
			})
		}
		return field, nil
	})
	if err != nil {
		return Value{}, err
	}
	if kind == "" {
		return Value{}, errors.New("a protobuf value without a kind in its typeMeta")
	}
	return Value{Kind: kind, WithoutManagedFields: len(protobufPrefix) + len(stripped)}, nil
}

func decodeJSON(value []byte) (Value, error) {
	var obj map[string]any
	if err := json.Unmarshal(value, &obj); err != nil {
		return Value{}, fmt.Errorf("a JSON value: %w", err)
	}
	kind, _ := obj["kind"].(string)
	if kind == "" {
		return Value{}, errors.New("a JSON value without a kind")
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		delete(meta, "managedFields")
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return Value{}, err
	}
	// kube-apiserver's JSON encoder ends a value with a newline.
	if bytes.HasSuffix(value, []byte("\n")) {
		out = append(out, '\n')
	}
	return Value{Kind: kind, WithoutManagedFields: len(out)}, nil
}

// rewriteField re-encodes a message with each length-delimited field
// passed through fn; other fields are copied as they are.
func rewriteField(msg []byte, fn func(protowire.Number, []byte) ([]byte, error)) ([]byte, error) {
	out := make([]byte, 0, len(msg))
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		if typ != protowire.BytesType {
			m := protowire.ConsumeFieldValue(num, typ, msg[n:])
			if m < 0 {
				return nil, protowire.ParseError(m)
			}
			out = append(out, msg[:n+m]...)
			msg = msg[n+m:]
			continue
		}
		field, m := protowire.ConsumeBytes(msg[n:])
		if m < 0 {
			return nil, protowire.ParseError(m)
		}
		msg = msg[n+m:]
		rewritten, err := fn(num, field)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", num, err)
		}
		if rewritten == nil {
			continue
		}
		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendBytes(out, rewritten)
	}
	return out, nil
}

// dropField is msg without every occurrence of the length-delimited
// field num.
func dropField(msg []byte, num protowire.Number) ([]byte, error) {
	return rewriteField(msg, func(n protowire.Number, field []byte) ([]byte, error) {
		if n == num {
			return nil, nil
		}
		return field, nil
	})
}

// stringField is the string field num of msg ("" when absent).
func stringField(msg []byte, num protowire.Number) (string, error) {
	var s string
	_, err := rewriteField(msg, func(n protowire.Number, field []byte) ([]byte, error) {
		if n == num {
			s = string(field)
		}
		return field, nil
	})
	return s, err
}

// Segments are the parts of an etcd key under kube-apiserver's prefix:
// /registry/pods/NS/NAME gives [pods NS NAME].
func Segments(key string) []string {
	return strings.Split(strings.TrimPrefix(key, "/registry/"), "/")
}
