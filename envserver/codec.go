package envserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/vmihailenco/msgpack/v5"
)

// codec is the body encoding of one request, mirrored in its reply.
type codec int

const (
	codecMsgpack codec = iota
	codecJSON
)

func (c codec) contentType() string {
	if c == codecJSON {
		return "application/json"
	}
	return "application/msgpack"
}

// codecFor picks the codec from a Content-Type (msgpack unless it says json).
func codecFor(contentType []byte) codec {
	if bytes.Contains(contentType, []byte("json")) {
		return codecJSON
	}
	return codecMsgpack
}

// decode parses body into v strictly under the default limits.
func (c codec) decode(body []byte, v any) error {
	lim := DefaultLimits(0, 0)
	return c.decodeWithin(body, v, &lim)
}

// decodeWithin parses body into v strictly: unknown fields, trailing bytes
// and declared lengths that the body cannot hold are bad_request; a field
// over its cap in lim, or a body that would decode to more than
// lim.MaxDecodeFactor times its size, is refused before decoding.
func (c codec) decodeWithin(body []byte, v any, lim *api.Limits) error {
	if len(body) == 0 {
		return aci.Errorf(aci.CodeBadRequest, "empty body")
	}
	if c == codecJSON {
		if err := jsonAmplification(body, lim); err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: %v", err)
		}
		if dec.More() {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: trailing data")
		}
		// The caps are checked in one place, the msgpack walk, over the
		// decoded request re-encoded.
		mp, err := msgpack.Marshal(v)
		if err != nil {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: %v", err)
		}
		w := walk{lim: lim}
		if err := w.check(mp); err != nil {
			return typedWalkErr(err)
		}
		return nil
	}
	w := walk{lim: lim}
	if err := w.check(body); err != nil {
		return typedWalkErr(err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
	}
	return nil
}

// typedWalkErr keeps a cap's typed error and makes the rest bad_request.
func typedWalkErr(err error) error {
	var e *aci.Error
	if errors.As(err, &e) {
		return e
	}
	return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
}

func (c codec) encode(v any) ([]byte, error) {
	if c == codecJSON {
		return json.Marshal(v)
	}
	return api.Marshal(v)
}

// maxDepth bounds msgpack nesting; requests are a few levels deep.
const maxDepth = 32

var errTruncated = errors.New("truncated")

// fixedSize is the whole encoded size of the fixed-width msgpack types, by tag.
var fixedSize = [256]int{0xcc: 2, 0xcd: 3, 0xce: 5, 0xcf: 9, 0xd0: 2, 0xd1: 3, 0xd2: 5, 0xd3: 9,
	0xca: 5, 0xcb: 9, 0xd4: 3, 0xd5: 4, 0xd6: 6, 0xd7: 10, 0xd8: 18}

// checkMsgpack walks one msgpack value under the default limits.
func checkMsgpack(b []byte) error {
	lim := DefaultLimits(0, 0)
	w := walk{lim: &lim}
	return w.check(b)
}

// walk checks one msgpack value covering all of a body without allocating:
// a declared array/map/string length that the remaining bytes cannot hold,
// nesting past maxDepth, trailing bytes, a field over its cap, and a body
// whose decoded size (estimated from above, per field) exceeds
// MaxDecodeFactor times its own. The decoder that runs after it therefore
// never sizes an allocation from a lie, and allocates in proportion to the
// body.
type walk struct {
	lim  *api.Limits
	cost int64 // estimated bytes the decoder will allocate
}

func (w *walk) check(b []byte) error {
	n, err := w.value(b, 0, "")
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	if limit := int64(w.lim.MaxDecodeFactor)*int64(len(b)) + decodeFloor; w.cost > limit {
		return aci.Errorf(aci.CodePayloadTooLarge, "a body of %d bytes that decodes to ~%d bytes (over %d times its size): send fewer, fuller items", len(b), w.cost, w.lim.MaxDecodeFactor)
	}
	return nil
}

// decodeFloor is decoding that any body may cost, however small.
const decodeFloor = 256 << 10

// Estimated decoded bytes per array element, by the field holding the
// array (an upper bound of the element's Go size plus what it points to).
const (
	costStruct = 512 // an action, a reset/step env, its pointers, and slice growth
	costString = 48  // a string header, slice growth and slack
	costNumber = 16
	costMap    = 64 // a pointed-to struct (target, observe, tokens)
)

// arrayCap returns the cap and element cost of an array held by field key.
func (w *walk) arrayCap(key string) (max int, cost int64, code aci.Code) {
	l := w.lim
	switch key {
	case "envs", "steps", "env_ids":
		return l.MaxBatch, costStruct, aci.CodeBatchTooLarge
	case "actions":
		return l.MaxActionsPerStep, costStruct, aci.CodePayloadTooLarge
	case "have":
		return l.MaxHave, costString, aci.CodePayloadTooLarge
	case "args", "modifiers":
		return l.MaxArgs, costString, aci.CodePayloadTooLarge
	case "prompt_ids", "response_ids", "response_logprobs":
		return l.MaxTokens, costNumber, aci.CodePayloadTooLarge
	}
	return l.MaxHave, costStruct, aci.CodePayloadTooLarge
}

// str checks a string held by field key.
func (w *walk) str(key string, s []byte) error {
	w.cost += int64(len(s))
	max, what := w.lim.MaxArgBytes, "max_arg_bytes"
	if key == "text" {
		max, what = w.lim.MaxTextBytes, "max_text_bytes"
	}
	if len(s) > max {
		return aci.Errorf(aci.CodePayloadTooLarge, "field %q: %d bytes, over the limit of %d (%s in /v1/spec)", key, len(s), max, what)
	}
	if key == "keys" {
		if n := bytes.Count(s, []byte("+")) + 1; n > w.lim.MaxKeyChord {
			return aci.Errorf(aci.CodePayloadTooLarge, "field \"keys\": a chord of %d keys, over the limit of %d (max_key_chord in /v1/spec)", n, w.lim.MaxKeyChord)
		}
	}
	return nil
}

// value returns the length of the msgpack value at the start of b, held
// by field key ("" at the top and for map keys).
func (w *walk) value(b []byte, depth int, key string) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if len(b) == 0 {
		return 0, errTruncated
	}
	c := b[0]
	// sizedAt reads a big-endian length of w bytes after the tag.
	sizedAt := func(n int) (int, error) {
		if len(b) < 1+n {
			return 0, errTruncated
		}
		switch n {
		case 1:
			return int(b[1]), nil
		case 2:
			return int(binary.BigEndian.Uint16(b[1:])), nil
		default:
			v := binary.BigEndian.Uint32(b[1:])
			if uint64(v) > uint64(len(b)) {
				return 0, fmt.Errorf("declared length %d exceeds body", v)
			}
			return int(v), nil
		}
	}
	blob := func(n, extra int, isStr bool) (int, error) { // str/bin/ext: header, length, payload
		size, err := sizedAt(n)
		if err != nil {
			return 0, err
		}
		hdr := 1 + n + extra
		total := hdr + size
		if total > len(b) {
			return 0, fmt.Errorf("declared length %d exceeds body", size)
		}
		if isStr {
			if err := w.str(key, b[hdr:total]); err != nil {
				return 0, err
			}
		} else {
			w.cost += int64(size)
		}
		return total, nil
	}
	array := func(hdr, count int) (int, error) {
		if count > len(b)-hdr {
			return 0, fmt.Errorf("declared %d items exceed body", count)
		}
		max, cost, code := w.arrayCap(key)
		if count > max {
			return 0, aci.Errorf(code, "field %q: %d items, over the limit of %d (see limits in /v1/spec)", key, count, max)
		}
		w.cost += int64(count) * cost
		off := hdr
		for i := 0; i < count; i++ {
			n, err := w.value(b[off:], depth+1, key)
			if err != nil {
				return 0, err
			}
			off += n
		}
		return off, nil
	}
	object := func(hdr, pairs int) (int, error) {
		if 2*pairs > len(b)-hdr {
			return 0, fmt.Errorf("declared %d items exceed body", 2*pairs)
		}
		w.cost += costMap
		off := hdr
		for i := 0; i < pairs; i++ {
			k, n, err := w.mapKey(b[off:], depth+1)
			if err != nil {
				return 0, err
			}
			off += n
			if n, err = w.value(b[off:], depth+1, k); err != nil {
				return 0, err
			}
			off += n
		}
		return off, nil
	}
	switch {
	case c <= 0x7f || c >= 0xe0 || c == 0xc0 || c == 0xc2 || c == 0xc3:
		return 1, nil
	case c >= 0x80 && c <= 0x8f:
		return object(1, int(c&0x0f))
	case c >= 0x90 && c <= 0x9f:
		return array(1, int(c&0x0f))
	case c >= 0xa0 && c <= 0xbf:
		n := 1 + int(c&0x1f)
		if n > len(b) {
			return 0, errTruncated
		}
		return n, w.str(key, b[1:n])
	}
	if n := fixedSize[c]; n > 0 {
		if n > len(b) {
			return 0, errTruncated
		}
		return n, nil
	}
	switch c {
	case 0xc4:
		return blob(1, 0, false)
	case 0xd9:
		return blob(1, 0, true)
	case 0xc5:
		return blob(2, 0, false)
	case 0xda:
		return blob(2, 0, true)
	case 0xc6:
		return blob(4, 0, false)
	case 0xdb:
		return blob(4, 0, true)
	case 0xc7:
		return blob(1, 1, false)
	case 0xc8:
		return blob(2, 1, false)
	case 0xc9:
		return blob(4, 1, false)
	case 0xdc, 0xdd, 0xde, 0xdf:
		n := 2
		if c == 0xdd || c == 0xdf {
			n = 4
		}
		count, err := sizedAt(n)
		if err != nil {
			return 0, err
		}
		if c >= 0xde {
			return object(1+n, count)
		}
		return array(1+n, count)
	}
	return 0, fmt.Errorf("invalid tag 0x%02x", c)
}

// mapKey walks a map key and returns it when it is a string (field names
// are); the returned string aliases nothing (it is only compared).
func (w *walk) mapKey(b []byte, depth int) (string, int, error) {
	n, err := w.value(b, depth, "")
	if err != nil {
		return "", 0, err
	}
	switch c := b[0]; {
	case c >= 0xa0 && c <= 0xbf:
		return string(b[1:n]), n, nil
	case c == 0xd9 && n >= 2:
		return string(b[2:n]), n, nil
	}
	return "", n, nil
}

// jsonAmplification refuses a JSON body whose values would decode to more
// than MaxDecodeFactor times its size: objects and nulls (each may become a
// whole struct) and other array items are counted from above by a scan
// that skips strings.
func jsonAmplification(b []byte, lim *api.Limits) error {
	var cost int64
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			cost += costString
		case '{':
			cost += costStruct
		case 'n':
			cost += costStruct // null
		case ',':
			cost += costNumber
		}
	}
	cost += int64(len(b))
	if limit := int64(lim.MaxDecodeFactor)*int64(len(b)) + decodeFloor; cost > limit {
		return aci.Errorf(aci.CodePayloadTooLarge, "a json body of %d bytes that decodes to ~%d bytes (over %d times its size)", len(b), cost, lim.MaxDecodeFactor)
	}
	return nil
}
