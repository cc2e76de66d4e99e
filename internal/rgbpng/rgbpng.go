// Package rgbpng encodes packed RGB24 pixels as PNG without the detour
// through image.RGBA that image/png needs: rows are filtered with the Up
// filter straight from the RGB24 buffer and deflated at the fastest level
// of a well-kept faster deflate (github.com/klauspost/compress), with
// encoders pooled so a step allocates nothing large. The output is a
// standard 8-bit truecolor PNG that any decoder reads back to the same
// pixels (docs/architecture.md, "Frames").
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

type encoder struct {
	zw  *zlib.Writer
	row []byte // one filtered row: filter byte + 3*w bytes
}

var encoders = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, zlib.BestSpeed)
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
		cur := rgb[y*stride : (y+1)*stride]
		if y == 0 {
			row[0] = 0 // None: no row above
			copy(row[1:], cur)
		} else {
			row[0] = 2 // Up
			up(row[1:], cur, rgb[(y-1)*stride:y*stride])
		}
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

// up writes cur - prev byte by byte, eight bytes at a time where it can
// (a byte-wise subtraction without borrows between lanes).
func up(dst, cur, prev []byte) {
	i := 0
	for ; i+8 <= len(cur); i += 8 {
		a := binary.LittleEndian.Uint64(cur[i:])
		b := binary.LittleEndian.Uint64(prev[i:])
		// SWAR: per-byte a-b mod 256.
		const h = 0x8080808080808080
		d := ((a | h) - (b &^ h)) ^ ((a ^ ^b) & h)
		binary.LittleEndian.PutUint64(dst[i:], d)
	}
	for ; i < len(cur); i++ {
		dst[i] = cur[i] - prev[i]
	}
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
