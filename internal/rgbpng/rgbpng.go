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

	"github.com/klauspost/compress/zlib"
)

var signature = []byte("\x89PNG\r\n\x1a\n")

// level is the deflate level: measured on terminal screens, level 2 is as
// cheap as level 1 and a little smaller.
const level = 2

type encoder struct {
	zw  *zlib.Writer
	row []byte // one filtered row: filter byte + 3*w bytes
}

var encoders = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, level)
	return &encoder{zw: zw}
}}

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
	e.zw.Reset(out)
	stride := w * 3
	if cap(e.row) < stride+1 {
		e.row = make([]byte, stride+1)
	}
	row := e.row[:stride+1]
	for y := 0; y < h; y++ {
		row[0] = 0 // filter None
		copy(row[1:], rgb[y*stride:(y+1)*stride])
		if _, err := e.zw.Write(row); err != nil {
			return dst, err
		}
	}
	if err := e.zw.Close(); err != nil {
		return dst, err
	}
	b := out.Bytes()
	n := len(b) - start - 8
	binary.BigEndian.PutUint32(b[start:], uint32(n))
	crc := crc32.ChecksumIEEE(b[start+4:])
	out.Write(binary.BigEndian.AppendUint32(nil, crc))
	writeChunk(out, "IEND", nil)
	return out.Bytes(), nil
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
