// Package mpcheck walks a msgpack body before it is decoded, without
// allocating: declared lengths the body cannot hold, nesting, trailing
// bytes, per-field caps, and an upper estimate of what decoding the body
// will allocate, bounded by a factor of its size. A decoder that runs after
// a successful Check never sizes an allocation from a lie and allocates in
// proportion to the body. The env server checks trainer requests with it,
// the host checks guest replies.
package mpcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Caps are the per-field rules of a walk. key is the map key holding the
// value ("" at the top level, for map keys, and for array elements of an
// array held by no key; elements inherit their array's key).
type Caps interface {
	// Array is asked about an array of n items held by key; it returns the
	// estimated decoded bytes per item, or an error refusing the array.
	Array(key string, n int) (itemCost int64, err error)
	// String is asked about a string held by key; an error refuses it.
	String(key string, s []byte) error
}

// Walk is one check; the zero Factor disables the decode estimate bound.
type Walk struct {
	Caps Caps
	// Factor and Floor bound the estimated decoded size: at most
	// Factor*len(body) + Floor bytes.
	Factor, Floor int64
	// Over builds the error for a body over the bound.
	Over func(body, estimate int64) error

	cost int64
}

// MapCost is the estimated cost of one decoded map (a pointed-to struct).
const MapCost = 64

// MaxDepth bounds nesting.
const MaxDepth = 32

var errTruncated = errors.New("truncated")

// fixedSize is the whole encoded size of the fixed-width msgpack types, by tag.
var fixedSize = [256]int{0xcc: 2, 0xcd: 3, 0xce: 5, 0xcf: 9, 0xd0: 2, 0xd1: 3, 0xd2: 5, 0xd3: 9,
	0xca: 5, 0xcb: 9, 0xd4: 3, 0xd5: 4, 0xd6: 6, 0xd7: 10, 0xd8: 18}

// Check walks b, which must hold exactly one msgpack value.
func (w *Walk) Check(b []byte) error {
	w.cost = 0
	n, err := w.value(b, 0, "")
	if err != nil {
		return err
	}
	if n != len(b) {
		return fmt.Errorf("%d trailing bytes", len(b)-n)
	}
	if w.Factor > 0 && w.cost > w.Factor*int64(len(b))+w.Floor {
		if w.Over != nil {
			return w.Over(int64(len(b)), w.cost)
		}
		return fmt.Errorf("a body of %d bytes would decode to ~%d bytes, over %d times its size", len(b), w.cost, w.Factor)
	}
	return nil
}

// Estimate is the decoded size the last Check estimated.
func (w *Walk) Estimate() int64 { return w.cost }

func (w *Walk) str(key string, s []byte) error {
	w.cost += int64(len(s))
	return w.Caps.String(key, s)
}

// value returns the length of the msgpack value at the start of b, held
// by field key.
func (w *Walk) value(b []byte, depth int, key string) (int, error) {
	if depth > MaxDepth {
		return 0, fmt.Errorf("nested deeper than %d", MaxDepth)
	}
	if len(b) == 0 {
		return 0, errTruncated
	}
	c := b[0]
	// sizedAt reads a big-endian length of n bytes after the tag.
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
		cost, err := w.Caps.Array(key, count)
		if err != nil {
			return 0, err
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
		w.cost += MapCost
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
// are).
func (w *Walk) mapKey(b []byte, depth int) (string, int, error) {
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

// Uniform caps every array at MaxItems items of ItemCost bytes each and
// every string at MaxString bytes, whatever field holds it.
type Uniform struct {
	MaxItems  int
	ItemCost  int64
	MaxString int
}

// Array implements Caps.
func (u Uniform) Array(key string, n int) (int64, error) {
	if n > u.MaxItems {
		return 0, fmt.Errorf("field %q: %d items, over %d", key, n, u.MaxItems)
	}
	return u.ItemCost, nil
}

// String implements Caps.
func (u Uniform) String(key string, s []byte) error {
	if len(s) > u.MaxString {
		return fmt.Errorf("field %q: a string of %d bytes, over %d", key, len(s), u.MaxString)
	}
	return nil
}

// Len is the encoded length of the msgpack value at the start of b, for a
// reader that slices a value out of a body it has already checked.
func Len(b []byte) (int, error) {
	w := Walk{Caps: Uniform{MaxItems: len(b), MaxString: len(b)}}
	return w.value(b, 0, "")
}
