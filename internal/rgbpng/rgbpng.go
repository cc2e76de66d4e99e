// Package rgbpng encodes packed RGB24 pixels as PNG without the detour
// through image.RGBA that image/png needs: rows go unfiltered straight from
// the RGB24 buffer into a well-kept faster deflate
// (github.com/klauspost/compress) at a fast level. Screens are mostly flat,
// where deflate's own matches do what a filter would. The output is a
// standard 8-bit truecolor PNG that any decoder reads back to the same pixels
// (docs/architecture.md, "Cost of a step").
//
// Successive frames of one screen mostly repeat: an Encoder deflates rows in
// bands of bandRows, each band on its own (a fresh window, ended by a sync
// flush, so that the pieces concatenate into one deflate stream), and keeps
// each band's output beside a hash of its pixels. The next frame of the same
// size deflates only the bands whose pixels changed, and the Adler-32 of the
// whole is combined from the bands' own. A band's output depends on its
// pixels alone, so the same pixels always give the same bytes.
package rgbpng

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/zeebo/xxh3"

	"github.com/shinken-rl/shinken/internal/rgbs2"
)

var signature = []byte("\x89PNG\r\n\x1a\n")

// level is the deflate level: measured on terminal screens, level 2 is as
// cheap as level 1 and a little smaller.
const level = 2

// bandRows is the height of a band, the capture's (rgbs2.BandRows: the
// frame's bands are versioned once, for every encoder); each band's own
// Huffman tables and fresh window cost a few percent of bytes on a whole
// 1280x800 frame.
const bandRows = rgbs2.BandRows

// Encoder encodes frames, reusing the deflated bands of the last frame of
// the same size wherever their pixels are unchanged. The zero value is
// ready; calls on one Encoder take turns.
type Encoder struct {
	mu    sync.Mutex
	fw    *flate.Writer
	seed  uint64 // random per Encoder: pixels cannot be drawn to collide with a band's hash
	w, h  int
	bands []band
	buf   bytes.Buffer
}

type band struct {
	sum   xxh3.Uint128 // of the band's pixels
	z     []byte       // their deflate blocks, ending in a sync flush; nil: none yet
	adler uint32       // Adler-32 of the band's filtered bytes
	n     int          // how many filtered bytes (rows × (1 + stride))
}

// encoders serves the one-shot Encode.
var encoders = sync.Pool{New: func() any { return new(Encoder) }}

// Encode appends the PNG of the w×h RGB24 image rgb to dst and returns it.
func Encode(dst []byte, rgb []byte, w, h int) ([]byte, error) {
	e := encoders.Get().(*Encoder)
	defer encoders.Put(e)
	return e.Encode(dst, rgb, w, h)
}

// filterNone is the byte that starts every row: filter type None.
var filterNone = []byte{0}

// finalBlock is an empty final deflate block (fixed Huffman codes): it ends
// the stream after the bands' sync flushes.
var finalBlock = []byte{0x03, 0x00}

// Encode appends the PNG of the w×h RGB24 image rgb to dst and returns it.
func (e *Encoder) Encode(dst []byte, rgb []byte, w, h int) ([]byte, error) {
	if w <= 0 || h <= 0 || len(rgb) != w*h*3 {
		return dst, fmt.Errorf("rgbpng: %d bytes for %dx%d RGB24", len(rgb), w, h)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fw == nil {
		e.fw, _ = flate.NewWriter(nil, level)
		e.seed = rand.Uint64()
	}
	if e.w != w || e.h != h {
		e.w, e.h = w, h
		e.bands = make([]band, (h+bandRows-1)/bandRows)
	}
	stride := w * 3
	zlen := 0
	for i := range e.bands {
		y0, y1 := i*bandRows, min((i+1)*bandRows, h)
		if err := e.band(&e.bands[i], rgb[y0*stride:y1*stride], stride); err != nil {
			return dst, err
		}
		zlen += len(e.bands[i].z)
	}

	out := bytes.NewBuffer(dst)
	out.Grow(len(signature) + 25 + 8 + 2 + zlen + len(finalBlock) + 4 + 4 + 12)
	out.Write(signature)
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:4], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:8], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits per sample, truecolor; compression, filter, interlace 0
	writeChunk(out, "IHDR", ihdr[:])

	// IDAT: the zlib stream by hand (header, the bands' deflate blocks, a
	// final empty block, Adler-32).
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(2+zlen+len(finalBlock)+4))
	copy(hdr[4:], "IDAT")
	out.Write(hdr[:])
	start := out.Len()
	out.Write([]byte{0x78, 0x01}) // deflate, 32 KiB window, fastest; header checksum ok
	sum := uint32(1)
	for _, b := range e.bands {
		out.Write(b.z)
		sum = adler32Combine(sum, b.adler, b.n)
	}
	out.Write(finalBlock)
	out.Write(binary.BigEndian.AppendUint32(nil, sum))
	crc := crc32.Update(crc32.ChecksumIEEE(hdr[4:]), crc32.IEEETable, out.Bytes()[start:])
	out.Write(binary.BigEndian.AppendUint32(nil, crc))
	writeChunk(out, "IEND", nil)
	return out.Bytes(), nil
}

// band brings b up to date with the rows px: deflated afresh unless their
// hash is the one b holds.
func (e *Encoder) band(b *band, px []byte, stride int) error {
	sum := xxh3.Hash128Seed(px, e.seed)
	if b.z != nil && b.sum == sum {
		return nil
	}
	e.buf.Reset()
	e.fw.Reset(&e.buf)
	a := uint32(1)
	for row := range slices.Chunk(px, stride) {
		if _, err := e.fw.Write(filterNone); err != nil {
			return err
		}
		if _, err := e.fw.Write(row); err != nil {
			return err
		}
		a = adler32(adler32(a, filterNone), row)
	}
	if err := e.fw.Flush(); err != nil {
		return err
	}
	b.sum, b.adler, b.n = sum, a, len(px)/stride*(stride+1)
	b.z = append(b.z[:0], e.buf.Bytes()...)
	return nil
}

// adler32Combine is the Adler-32 of A followed by B, from A's sum a, B's
// sum b (started from 1) and B's length (as zlib's adler32_combine).
func adler32Combine(a, b uint32, lenB int) uint32 {
	const mod = 65521
	rem := uint32(lenB % mod)
	s1 := a & 0xffff
	s2 := rem * s1 % mod
	s1 += (b & 0xffff) + mod - 1
	s2 += (a >> 16) + (b >> 16) + mod - rem
	if s1 >= mod {
		s1 -= mod
	}
	if s1 >= mod {
		s1 -= mod
	}
	if s2 >= 2*mod {
		s2 -= 2 * mod
	}
	if s2 >= mod {
		s2 -= mod
	}
	return s2<<16 | s1
}

// adler32 extends the Adler-32 checksum sum over p (RFC 1950), eight bytes
// per round: s1 gains their sum, s2 gains 8·s1 plus their sum weighted
// 8…1, both taken with one multiply over 16-bit lanes (each lane's total
// stays below 2^16, so lanes never carry into each other). Reductions
// happen every nmax bytes, as in the byte-wise form, so nothing overflows.
func adler32(sum uint32, p []byte) uint32 {
	const (
		mod  = 65521
		nmax = 5552 &^ 7 // a multiple of 8 at most zlib's NMAX
		lo   = 0x00ff00ff00ff00ff
		ones = 0x0001000100010001
		wEv  = 2 | 4<<16 | 6<<32 | 8<<48 // weights of bytes 6, 4, 2, 0
		wOd  = 1 | 3<<16 | 5<<32 | 7<<48 // weights of bytes 7, 5, 3, 1
	)
	s1, s2 := sum&0xffff, sum>>16
	for len(p) > 0 {
		chunk := p
		if len(chunk) > nmax {
			chunk = p[:nmax]
		}
		p = p[len(chunk):]
		for len(chunk) >= 8 {
			v := binary.LittleEndian.Uint64(chunk)
			ev, od := v&lo, (v>>8)&lo
			s2 += 8*s1 + uint32((ev*wEv)>>48) + uint32((od*wOd)>>48)
			s1 += uint32(((ev + od) * ones) >> 48)
			chunk = chunk[8:]
		}
		for _, c := range chunk {
			s1 += uint32(c)
			s2 += s1
		}
		s1 %= mod
		s2 %= mod
	}
	return s2<<16 | s1
}

func writeChunk(out *bytes.Buffer, typ string, data []byte) {
	var hdr [8]byte
	binary.BigEndian.PutUint32(hdr[:4], uint32(len(data)))
	copy(hdr[4:], typ)
	out.Write(hdr[:])
	out.Write(data)
	crc := crc32.NewIEEE()
	crc.Write(hdr[4:])
	crc.Write(data)
	out.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
}
