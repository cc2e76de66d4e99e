// Package rgbpng encodes packed RGB24 pixels as PNG without the detour
// through image.RGBA that image/png needs: rows go unfiltered straight from
// the RGB24 buffer into a well-kept faster deflate
// (github.com/klauspost/compress) at a fast level, with encoders pooled so a
// step allocates nothing large. On a 1280x800 terminal screen this costs
// about a fifth of image/png at BestSpeed (which tries five filters per row)
// for about 1.5x the bytes; screens are mostly flat, where deflate's own
// matches do what a filter would. The output is a standard 8-bit truecolor
// PNG that any decoder reads back to the same pixels (docs/architecture.md,
// "Cost of a step").
package rgbpng

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/flate"
)

var signature = []byte("\x89PNG\r\n\x1a\n")

// level is the deflate level: measured on terminal screens, level 2 is as
// cheap as level 1 and a little smaller.
const level = 2

type encoder struct{ fw *flate.Writer }

var encoders = sync.Pool{New: func() any {
	fw, _ := flate.NewWriter(nil, level)
	return &encoder{fw: fw}
}}

// filterNone is the byte that starts every row: filter type None.
var filterNone = []byte{0}

// Encode appends the PNG of the w×h RGB24 image rgb to dst and returns it.
func Encode(dst []byte, rgb []byte, w, h int) ([]byte, error) {
	if w <= 0 || h <= 0 || len(rgb) != w*h*3 {
		return dst, fmt.Errorf("rgbpng: %d bytes for %dx%d RGB24", len(rgb), w, h)
	}
	out := bytes.NewBuffer(dst)
	// A screen deflates to a small fraction of its raw size: start with a
	// tenth and let the buffer grow if it must.
	out.Grow(len(signature) + 25 + 12 + len(rgb)/10 + 12)
	out.Write(signature)
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:4], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:8], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits per sample, truecolor; compression, filter, interlace 0
	writeChunk(out, "IHDR", ihdr[:])

	// IDAT: length and type first, patched once the data is known.
	start := out.Len()
	out.Write([]byte{0, 0, 0, 0, 'I', 'D', 'A', 'T'})
	e := encoders.Get().(*encoder)
	defer encoders.Put(e)
	// The zlib stream by hand (header, raw deflate, Adler-32) so that the
	// checksum is the fast one below and rows go in without a copy.
	out.Write([]byte{0x78, 0x01}) // deflate, 32 KiB window, fastest; header checksum ok
	e.fw.Reset(out)
	stride := w * 3
	sum := uint32(1)
	for y := 0; y < h; y++ {
		row := rgb[y*stride : (y+1)*stride]
		if _, err := e.fw.Write(filterNone); err != nil {
			return dst, err
		}
		if _, err := e.fw.Write(row); err != nil {
			return dst, err
		}
		sum = adler32(adler32(sum, filterNone), row)
	}
	if err := e.fw.Close(); err != nil {
		return dst, err
	}
	out.Write(binary.BigEndian.AppendUint32(nil, sum))
	b := out.Bytes()
	n := len(b) - start - 8
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	crc := crc32.ChecksumIEEE(b[start+4:])
	out.Write(binary.BigEndian.AppendUint32(nil, crc))
	writeChunk(out, "IEND", nil)
	return out.Bytes(), nil
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
