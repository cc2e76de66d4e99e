package api

import (
	"bytes"
	"io"
	"reflect"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
)

// Marshal is the server's msgpack encoder for every reply, and what the
// golden files under testdata are written with: map keys sorted (also for
// the string-keyed map types msgpack's SetSortMapKeys leaves unsorted) and
// integers in their compact forms, so the same value always encodes to
// the same bytes.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := MarshalTo(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalTo is Marshal writing into w, e.g. a reply's pooled body buffer,
// so that a reply carrying frames is not built in a buffer of its own first.
func MarshalTo(w io.Writer, v any) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(w)
	enc.SetSortMapKeys(true)
	enc.UseCompactInts(true)
	return enc.Encode(v)
}

func init() {
	for _, m := range []any{map[string][]byte(nil), map[string]int64(nil), map[string]int(nil)} {
		msgpack.Register(m, encodeSortedStringMap, nil)
	}
}

func encodeSortedStringMap(e *msgpack.Encoder, v reflect.Value) error {
	if v.IsNil() {
		return e.EncodeNil()
	}
	keys := v.MapKeys()
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	if err := e.EncodeMapLen(len(keys)); err != nil {
		return err
	}
	for _, k := range keys {
		if err := e.EncodeString(k.String()); err != nil {
			return err
		}
		if err := e.EncodeValue(v.MapIndex(k)); err != nil {
			return err
		}
	}
	return nil
}
