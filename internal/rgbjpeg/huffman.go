package rgbjpeg

import (
	"encoding/binary"
	"math/bits"
	"slices"
)

// huffSpec is a Huffman table the way DHT carries it (T.81 B.2.4.2): how
// many codes there are of each length 1..16, then the symbols in code order.
type huffSpec struct {
	counts  [16]byte
	symbols []byte
}

// The typical tables of T.81 Annex K.3 (K.3.3.1 DC, K.3.3.2 AC). A DC
// symbol is a magnitude category; an AC symbol is run<<4 | category, with
// 0x00 ending the block (EOB) and 0xf0 standing for sixteen zeros (ZRL).
// Encoders that gather statistics build their own tables; these are good
// enough for natural and screen content alike and cost nothing to choose.
var (
	lumaDCSpec = huffSpec{
		counts:  [16]byte{0, 1, 5, 1, 1, 1, 1, 1, 1},
		symbols: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	}
	chromaDCSpec = huffSpec{
		counts:  [16]byte{0, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
		symbols: []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
	}
	lumaACSpec = huffSpec{
		counts: [16]byte{0, 2, 1, 3, 3, 2, 4, 3, 5, 5, 4, 4, 0, 0, 1, 0x7d},
		symbols: []byte{
			0x01, 0x02, 0x03, 0x00, 0x04, 0x11, 0x05, 0x12,
			0x21, 0x31, 0x41, 0x06, 0x13, 0x51, 0x61, 0x07,
			0x22, 0x71, 0x14, 0x32, 0x81, 0x91, 0xa1, 0x08,
			0x23, 0x42, 0xb1, 0xc1, 0x15, 0x52, 0xd1, 0xf0,
			0x24, 0x33, 0x62, 0x72, 0x82, 0x09, 0x0a, 0x16,
			0x17, 0x18, 0x19, 0x1a, 0x25, 0x26, 0x27, 0x28,
			0x29, 0x2a, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39,
			0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0x49,
			0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58, 0x59,
			0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68, 0x69,
			0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78, 0x79,
			0x7a, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89,
			0x8a, 0x92, 0x93, 0x94, 0x95, 0x96, 0x97, 0x98,
			0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7,
			0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6,
			0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3, 0xc4, 0xc5,
			0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2, 0xd3, 0xd4,
			0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda, 0xe1, 0xe2,
			0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9, 0xea,
			0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	}
	chromaACSpec = huffSpec{
		counts: [16]byte{0, 2, 1, 2, 4, 4, 3, 4, 7, 5, 4, 4, 0, 1, 2, 0x77},
		symbols: []byte{
			0x00, 0x01, 0x02, 0x03, 0x11, 0x04, 0x05, 0x21,
			0x31, 0x06, 0x12, 0x41, 0x51, 0x07, 0x61, 0x71,
			0x13, 0x22, 0x32, 0x81, 0x08, 0x14, 0x42, 0x91,
			0xa1, 0xb1, 0xc1, 0x09, 0x23, 0x33, 0x52, 0xf0,
			0x15, 0x62, 0x72, 0xd1, 0x0a, 0x16, 0x24, 0x34,
			0xe1, 0x25, 0xf1, 0x17, 0x18, 0x19, 0x1a, 0x26,
			0x27, 0x28, 0x29, 0x2a, 0x35, 0x36, 0x37, 0x38,
			0x39, 0x3a, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48,
			0x49, 0x4a, 0x53, 0x54, 0x55, 0x56, 0x57, 0x58,
			0x59, 0x5a, 0x63, 0x64, 0x65, 0x66, 0x67, 0x68,
			0x69, 0x6a, 0x73, 0x74, 0x75, 0x76, 0x77, 0x78,
			0x79, 0x7a, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
			0x88, 0x89, 0x8a, 0x92, 0x93, 0x94, 0x95, 0x96,
			0x97, 0x98, 0x99, 0x9a, 0xa2, 0xa3, 0xa4, 0xa5,
			0xa6, 0xa7, 0xa8, 0xa9, 0xaa, 0xb2, 0xb3, 0xb4,
			0xb5, 0xb6, 0xb7, 0xb8, 0xb9, 0xba, 0xc2, 0xc3,
			0xc4, 0xc5, 0xc6, 0xc7, 0xc8, 0xc9, 0xca, 0xd2,
			0xd3, 0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xd9, 0xda,
			0xe2, 0xe3, 0xe4, 0xe5, 0xe6, 0xe7, 0xe8, 0xe9,
			0xea, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,
			0xf9, 0xfa,
		},
	}
)

// huffTable maps a symbol to its code, packed as code<<8 | length so that
// one load gives both.
type huffTable [256]uint32

var (
	lumaDC, lumaAC     = buildTable(&lumaDCSpec), buildTable(&lumaACSpec)
	chromaDC, chromaAC = buildTable(&chromaDCSpec), buildTable(&chromaACSpec)
)

// buildTable assigns codes as T.81 C.2 does: within a length, codes count
// up in symbol order; moving to the next length appends a zero bit.
func buildTable(s *huffSpec) *huffTable {
	var t huffTable
	code, k := uint32(0), 0
	for n := 1; n <= 16; n++ {
		for range s.counts[n-1] {
			t[s.symbols[k]] = code<<8 | uint32(n)
			code++
			k++
		}
		code <<= 1
	}
	return &t
}

// dhtSegment is the one DHT marker segment carrying all four tables; it is
// the same for every image.
var dhtSegment = func() []byte {
	specs := []struct {
		classID byte // Tc<<4 | Th
		spec    *huffSpec
	}{{0x00, &lumaDCSpec}, {0x10, &lumaACSpec}, {0x01, &chromaDCSpec}, {0x11, &chromaACSpec}}
	n := 2
	for _, s := range specs {
		n += 1 + 16 + len(s.spec.symbols)
	}
	b := []byte{0xff, 0xc4, byte(n >> 8), byte(n)}
	for _, s := range specs {
		b = append(b, s.classID)
		b = append(b, s.spec.counts[:]...)
		b = append(b, s.spec.symbols...)
	}
	return b
}()

// bitWriter packs entropy-coded bits into buf. Pending bits are the low n
// bits of acc (older ones above newer ones); whole 32-bit words leave as
// soon as they are complete, so n stays below 32 between codes and one
// code plus its extra bits (at most 16+11) always fits.
type bitWriter struct {
	buf []byte
	acc uint64
	n   uint
}

// maxBlockBytes bounds what one block can add to buf: up to 31 bits
// pending from before, a DC code with its extra bits (at most 11+11), and
// 63 AC codes with theirs (at most 16+10 each; an EOB or ZRL only ever
// stands in for zeros) come to under 1700 bits, 213 bytes, which stuffing
// at most doubles.
const maxBlockBytes = 512

// category returns v's magnitude category (T.81 F.1.2.1: the number of
// bits of |v|), and its sign: 0 when v >= 0, −1 when below.
func category(v int32) (size uint, sign int32) {
	sign = v >> 31
	return uint(bits.Len32(uint32((v ^ sign) - sign))), sign
}

// coded returns the bits to write for a coefficient v of category size,
// whose symbol has code c (code<<8 | length, from a huffTable), and how
// many there are: the code, then size extra bits that are v itself when
// v is positive and the low bits of v−1 when negative (F.1.2.1). v−1 then
// has all ones above those bits (|v| < 2^size), so adding it to
// (code+1)<<size gives code<<size | extra without a mask.
func coded(c uint32, v, sign int32, size uint) (uint64, uint) {
	return uint64(int64(c>>8)-int64(sign))<<(size&63) + uint64(int64(v+sign)), uint(c&0xff) + size
}

// put32 writes the word v at b[i:] and returns the index after it,
// stuffing a zero byte after each 0xff byte (T.81 B.1.1.5) so a decoder
// does not take it for a marker. The caller has made room for 8 bytes.
// Most words hold no 0xff and go out whole.
func put32(b []byte, i int, v uint32) int {
	// A byte of v is 0xff exactly where a byte of ^v is zero; the usual
	// zero-byte test on ^v finds one without looking at each byte.
	if (^v-0x01010101)&v&0x80808080 == 0 {
		binary.BigEndian.PutUint32(b[i:], v)
		return i + 4
	}
	return put32Stuffed(b, i, v)
}

func put32Stuffed(b []byte, i int, v uint32) int {
	for s := 24; s >= 0; s -= 8 {
		c := byte(v >> s)
		b[i] = c
		i++
		if c == 0xff {
			b[i] = 0
			i++
		}
	}
	return i
}

// block writes one block's quantised coefficients q (zigzag order): the DC
// difference from *prev, then the AC coefficients whose bits are set in nz
// (bit k for zigzag position k), as run/size codes (T.81 F.1.2.2). Walking
// the set bits skips the zeros without looking at them, which is what makes
// sparse blocks cheap. The writer's state lives in locals meanwhile, and
// room for the whole block is made up front so that nothing in the loop
// calls out (which would force them to the stack). Whether a word is due
// after a code is a branch the predictor often misses; storing the word
// unconditionally and advancing by arithmetic instead was measured, and
// is slower: it puts the store index on the critical path.
func (w *bitWriter) block(q *[64]int32, nz uint64, prev *int32, dc, ac *huffTable) {
	if cap(w.buf)-len(w.buf) < maxBlockBytes {
		w.buf = slices.Grow(w.buf, maxBlockBytes)
	}
	b, i, acc, n := w.buf[:cap(w.buf)], len(w.buf), w.acc, w.n

	d := q[0] - *prev
	*prev = q[0]
	size, sign := category(d)
	x, l := coded(dc[size], d, sign, size)
	acc = acc<<(l&63) | x
	if n += l; n >= 32 {
		n -= 32
		i = put32(b, i, uint32(acc>>(n&63)))
	}

	// m holds the AC positions after the last one written, shifted down so
	// that bit 0 is the next position; the run of zeros is its count of
	// trailing zeros.
	k := 0
	for m := nz >> 1; m != 0; {
		run := bits.TrailingZeros64(m)
		m = m >> run >> 1
		k += run + 1
		for ; run >= 16; run -= 16 {
			c := ac[0xf0]
			acc = acc<<(c&63) | uint64(c>>8)
			if n += uint(c & 0xff); n >= 32 {
				n -= 32
				i = put32(b, i, uint32(acc>>(n&63)))
			}
		}
		// Baseline AC coefficients have at most 10 bits; the forward DCT of
		// 8-bit samples stays below 1024 even at quantiser 1 (see
		// TestCoefficientRange), so the &0xff only keeps the index in the
		// table.
		v := q[k&63]
		size, sign := category(v)
		x, l := coded(ac[(run<<4|int(size))&0xff], v, sign, size)
		acc = acc<<(l&63) | x
		if n += l; n >= 32 {
			n -= 32
			i = put32(b, i, uint32(acc>>(n&63)))
		}
	}
	if k != 63 {
		c := ac[0x00]
		acc = acc<<(c&63) | uint64(c>>8)
		if n += uint(c & 0xff); n >= 32 {
			n -= 32
			i = put32(b, i, uint32(acc>>(n&63)))
		}
	}
	w.buf, w.acc, w.n = b[:i], acc, n
}

// dcOnly writes a block whose only nonzero coefficient is the DC, dc: its
// difference from *prev and an EOB. That is at most 24 bits (a DC code of
// at most 9 bits with the 4-bit luma EOB, or of 11 with the 2-bit chroma
// one, plus 11 extra bits), so they go in at once and one flush covers
// them. Flat blocks, which are most of a screen, take this path.
func (w *bitWriter) dcOnly(dc int32, prev *int32, dcT, acT *huffTable) {
	if cap(w.buf)-len(w.buf) < 8 {
		w.buf = slices.Grow(w.buf, maxBlockBytes)
	}
	d := dc - *prev
	*prev = dc
	size, sign := category(d)
	x, l := coded(dcT[size], d, sign, size)
	eob := acT[0x00]
	acc := w.acc<<((l+uint(eob&0xff))&63) | x<<(eob&63) | uint64(eob>>8)
	n := w.n + l + uint(eob&0xff)
	if n >= 32 {
		n -= 32
		w.buf = w.buf[:put32(w.buf[:cap(w.buf)], len(w.buf), uint32(acc>>(n&63)))]
	}
	w.acc, w.n = acc, n
}

// finish pads the last byte with one bits (T.81 F.1.2.3) and writes out
// what is pending.
func (w *bitWriter) finish() []byte {
	pad := (8 - w.n%8) % 8
	w.acc = w.acc<<pad | (1<<pad - 1)
	w.n += pad
	for w.n >= 8 {
		w.n -= 8
		b := byte(w.acc >> w.n)
		w.buf = append(w.buf, b)
		if b == 0xff {
			w.buf = append(w.buf, 0)
		}
	}
	return w.buf
}
