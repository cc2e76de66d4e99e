package envserver

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shinken-rl/shinken/aci"
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

// decode parses body into v strictly: unknown fields, trailing bytes and
// declared lengths that the body cannot hold are bad_request.
func (c codec) decode(body []byte, v any) error {
	if len(body) == 0 {
		return aci.Errorf(aci.CodeBadRequest, "empty body")
	}
	if c == codecJSON {
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: %v", err)
		}
		if dec.More() {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: trailing data")
		}
		return nil
	}
	if err := checkMsgpack(body); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
	}
	return nil
}

func (c codec) encode(v any) ([]byte, error) {
	if c == codecJSON {
		return json.Marshal(v)
	}
	return msgpack.Marshal(v)
}

// maxDepth bounds msgpack nesting; requests are a few levels deep.
const maxDepth = 32

var errTruncated = errors.New("truncated")

// fixedSize is the whole encoded size of the fixed-width msgpack types, by tag.
var fixedSize = [256]int{0xcc: 2, 0xcd: 3, 0xce: 5, 0xcf: 9, 0xd0: 2, 0xd1: 3, 0xd2: 5, 0xd3: 9,
	0xca: 5, 0xcb: 9, 0xd4: 3, 0xd5: 4, 0xd6: 6, 0xd7: 10, 0xd8: 18}

// checkMsgpack walks one msgpack value covering all of b without allocating,
// rejecting a declared array/map/string length that the remaining bytes cannot
// hold, nesting past maxDepth, and trailing bytes. The decoder that runs after
// it therefore never sizes an allocation from a lie.
func checkMsgpack(b []byte) error {
	n, err := skipValue(b, 0)
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	return nil
}

// skipValue returns the length of the msgpack value at the start of b.
func skipValue(b []byte, depth int) (int, error) {
	if depth > maxDepth {
		return 0, fmt.Errorf("nested deeper than %d", maxDepth)
	}
	if len(b) == 0 {
		return 0, errTruncated
	}
	c := b[0]
	// sizedAt reads a big-endian length of w bytes after the tag.
	sizedAt := func(w int) (int, error) {
		if len(b) < 1+w {
			return 0, errTruncated
		}
		switch w {
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
	blob := func(w, extra int) (int, error) { // str/bin/ext: header, length, payload
		n, err := sizedAt(w)
		if err != nil {
			return 0, err
		}
		total := 1 + w + extra + n
		if total > len(b) {
			return 0, fmt.Errorf("declared length %d exceeds body", n)
		}
		return total, nil
	}
	items := func(hdr, count int) (int, error) { // array/map elements
		if count > len(b)-hdr {
			return 0, fmt.Errorf("declared %d items exceed body", count)
		}
		off := hdr
		for i := 0; i < count; i++ {
			n, err := skipValue(b[off:], depth+1)
			if err != nil {
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
		return items(1, 2*int(c&0x0f))
	case c >= 0x90 && c <= 0x9f:
		return items(1, int(c&0x0f))
	case c >= 0xa0 && c <= 0xbf:
		n := 1 + int(c&0x1f)
		if n > len(b) {
			return 0, errTruncated
		}
		return n, nil
	}
	if n := fixedSize[c]; n > 0 {
		if n > len(b) {
			return 0, errTruncated
		}
		return n, nil
	}
	switch c {
	case 0xc4, 0xd9:
		return blob(1, 0)
	case 0xc5, 0xda:
		return blob(2, 0)
	case 0xc6, 0xdb:
		return blob(4, 0)
	case 0xc7:
		return blob(1, 1)
	case 0xc8:
		return blob(2, 1)
	case 0xc9:
		return blob(4, 1)
	case 0xdc, 0xdd, 0xde, 0xdf:
		w := 2
		if c == 0xdd || c == 0xdf {
			w = 4
		}
		n, err := sizedAt(w)
		if err != nil {
			return 0, err
		}
		if c >= 0xde {
			n *= 2
		}
		return items(1+w, n)
	}
	return 0, fmt.Errorf("invalid tag 0x%02x", c)
}
