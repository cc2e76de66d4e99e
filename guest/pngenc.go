package guest

import (
	"encoding/binary"
	"hash/adler32"
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/flate"
)

// pngFilter is the row filter encodePNG applies. Up (each byte minus the
// byte above) suits screens: text rows and window chrome repeat
// vertically and flat areas become zero runs (see BenchmarkEncodePNG).
const pngFilter = 2 // Up

// pngWriters reuses deflate writers: each holds ~1 MiB of state that
// allocating per frame would cost more than the compression itself.
var pngWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// encodePNG encodes RGB24 pixels (w*h*3 bytes, row-major) as an 8-bit
// truecolor PNG, appending to dst. It is lossless: decoding gives back
// exactly rgb, so a frame's hash (taken over rgb) always names the same
// pixels whichever encoder wrote the bytes.
func encodePNG(dst, rgb []byte, w, h int) []byte {
	return encodePNGFilter(dst, rgb, w, h, pngFilter)
}

// encodePNGFilter is encodePNG with the row filter given: 0 (none) or 2 (up).
func encodePNGFilter(dst, rgb []byte, w, h int, filter byte) []byte {
	dst = append(dst, "\x89PNG\r\n\x1a\n"...)
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:4], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:8], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // bit depth 8, color type truecolor
	dst = appendChunk(dst, "IHDR", ihdr[:])

	// IDAT: the chunk header is written once the zlib stream's length
	// is known; the stream is deflated straight into dst.
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 'I', 'D', 'A', 'T')
	dst = append(dst, 0x78, 0x01) // zlib: deflate, 32K window, fastest
	buf := &appendWriter{b: dst}
	zw := pngWriters.Get().(*flate.Writer)
	zw.Reset(buf)
	stride := w * 3
	row := make([]byte, 1+stride)
	row[0] = filter
	sum := adler32.New()
	for y := 0; y < h; y++ {
		cur := rgb[y*stride : (y+1)*stride]
		if y == 0 || filter == 0 {
			copy(row[1:], cur) // Up over a row of zeros is the row itself
		} else {
			prev := rgb[(y-1)*stride : y*stride]
			upFilter(row[1:], cur, prev)
		}
		sum.Write(row)
		zw.Write(row)
	}
	zw.Close()
	pngWriters.Put(zw)
	dst = buf.b
	dst = sum.Sum(dst)
	n := len(dst) - start - 8
	binary.BigEndian.PutUint32(dst[start:start+4], uint32(n))
	dst = binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start+4:]))
	return appendChunk(dst, "IEND", nil)
}

// upFilter writes cur - prev, byte by byte (mod 256), eight at a time.
func upFilter(dst, cur, prev []byte) {
	i := 0
	for ; i+8 <= len(cur); i += 8 {
		a := binary.LittleEndian.Uint64(cur[i:])
		b := binary.LittleEndian.Uint64(prev[i:])
		// Bytewise subtraction without borrows crossing bytes.
		const hi = 0x8080808080808080
		d := ((a | hi) - (b &^ hi)) ^ ((a ^ ^b) & hi)
		binary.LittleEndian.PutUint64(dst[i:], d)
	}
	for ; i < len(cur); i++ {
		dst[i] = cur[i] - prev[i]
	}
}

func appendChunk(dst []byte, typ string, data []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(data)))
	start := len(dst)
	dst = append(dst, typ...)
	dst = append(dst, data...)
	return binary.BigEndian.AppendUint32(dst, crc32.ChecksumIEEE(dst[start:]))
}

// appendWriter appends what is written to b.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
