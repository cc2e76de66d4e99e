// Package rgbs2 compresses packed RGB24 frames with S2
// (github.com/klauspost/compress/s2) band by band, so that the next frame of
// a screen recompresses only the bands that changed (docs/architecture.md,
// "Cost of a step").
//
// Each band of BandRows rows is compressed as an S2 block of its own. An S2
// block is a length header followed by literals and back-references, and
// S2's encoder never starts a block with a reference to data before it: the
// element streams of independent blocks therefore concatenate, under one
// header for the whole length, into a single S2 block that any S2 decoder
// reads back to the whole frame. The byte length of each band's elements
// comes beside it, so a reader holding the previous frame can decode only
// the bands whose bytes differ (Patch).
package rgbs2

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/klauspost/compress/s2"
)

// BandRows is the height of a band: a terminal line is about 15 rows, so a
// typed letter changes one or two bands.
const BandRows = 16

// Encoder compresses frames, reusing the compressed bands of the last frame
// of the same size wherever the caller says their pixels are unchanged. The
// zero value is ready; calls on one Encoder must take turns.
type Encoder struct {
	w, h  int
	bands []band
	tmp   []byte // S2's worst-case output for one band
}

type band struct {
	ver uint64 // the caller's version of the band's pixels; 0: none compressed yet
	el  []byte // the band's S2 elements (its block without the length header)
}

// Bands is the number of bands of a frame h rows high.
func Bands(h int) int { return (h + BandRows - 1) / BandRows }

// Encode appends the S2 block of the w×h RGB24 frame rgb to dst and returns
// it with the byte length of each band's elements (a new slice). ver holds a version of
// each band's pixels (Bands(h) of them, never 0): a band whose version is the
// one its last compression had is not compressed again. Equal versions must
// mean equal pixels; the caller that converts the rows keeps them.
func (e *Encoder) Encode(dst, rgb []byte, w, h int, ver []uint64) ([]byte, []int, error) {
	if w <= 0 || h <= 0 || len(rgb) != w*h*3 || len(ver) != Bands(h) {
		return dst, nil, fmt.Errorf("rgbs2: %d bytes and %d versions for %dx%d RGB24", len(rgb), len(ver), w, h)
	}
	if e.w != w || e.h != h {
		e.w, e.h = w, h
		e.bands = make([]band, Bands(h))
	}
	stride := w * 3
	total := 0
	for i := range e.bands {
		b := &e.bands[i]
		if ver[i] == 0 || b.ver != ver[i] {
			px := rgb[i*BandRows*stride : min((i+1)*BandRows, h)*stride]
			if n := s2.MaxEncodedLen(len(px)); cap(e.tmp) < n {
				e.tmp = make([]byte, n)
			}
			blk := s2.Encode(e.tmp[:cap(e.tmp)], px)
			_, hdr := binary.Uvarint(blk)
			b.el = append(b.el[:0], blk[hdr:]...)
			b.ver = ver[i]
		}
		total += len(b.el)
	}
	dst = binary.AppendUvarint(dst, uint64(len(rgb)))
	dst = grow(dst, total)
	lens := make([]int, 0, len(e.bands))
	for _, b := range e.bands {
		dst = append(dst, b.el...)
		lens = append(lens, len(b.el))
	}
	return dst, lens, nil
}

// grow makes room for n more bytes in one allocation.
func grow(b []byte, n int) []byte {
	if cap(b)-len(b) >= n {
		return b
	}
	return append(make([]byte, 0, len(b)+n), b...)
}

// ErrBands is returned for a block whose band lengths do not add up to it.
var ErrBands = errors.New("rgbs2: band lengths do not match the block")

// Split returns the offset of each band's elements in blk and the offset
// just past the last, checking that lens covers blk exactly.
func Split(blk []byte, lens []int, offs []int) ([]int, error) {
	_, hdr := binary.Uvarint(blk)
	if hdr <= 0 {
		return offs, ErrBands
	}
	offs = append(offs[:0], hdr)
	at := hdr
	for _, n := range lens {
		if n < 0 || n > len(blk)-at {
			return offs, ErrBands
		}
		at += n
		offs = append(offs, at)
	}
	if at != len(blk) {
		return offs, ErrBands
	}
	return offs, nil
}

// Patch brings dst, the w×h frame decoded from the block old (band offsets
// oldOffs, from Split), up to the block blk (offsets offs): only the bands
// whose elements differ are decoded. With old nil every band is decoded.
//
// Every band is decoded on its own, never after the bands before it, so a
// band patched into dst decodes to the same pixels wherever it stands; a
// band whose bytes are unchanged therefore still holds what blk says. A
// band that does not decode on its own (a block this package did not write)
// fails the patch; dst is then partly patched, and the caller decodes blk
// whole and patches nothing from it.
func Patch(dst []byte, w, h int, old []byte, oldOffs []int, blk []byte, offs []int, scratch []byte) ([]byte, error) {
	nb := Bands(h)
	if len(dst) != w*h*3 || len(offs) != nb+1 || (old != nil && len(oldOffs) != nb+1) {
		return scratch, ErrBands
	}
	stride := w * 3
	for i := range nb {
		el := blk[offs[i]:offs[i+1]]
		if old != nil && bytes.Equal(el, old[oldOffs[i]:oldOffs[i+1]]) {
			continue
		}
		px := dst[i*BandRows*stride : min((i+1)*BandRows, h)*stride]
		scratch = binary.AppendUvarint(scratch[:0], uint64(len(px)))
		scratch = append(scratch, el...)
		out, err := s2.Decode(px, scratch)
		if err != nil || len(out) != len(px) || &out[0] != &px[0] {
			return scratch, fmt.Errorf("rgbs2: band %d: %v", i, err)
		}
	}
	return scratch, nil
}
