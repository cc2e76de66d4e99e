// Package rgbjpeg encodes packed RGB24 pixels as baseline JPEG without the
// detour through image.RGBA that image/jpeg needs, and at a fraction of its
// cost: on a 1280x800 screen about an eighth, which is less than rgbpng
// takes for the same frame.
//
// The output is baseline JFIF: 8-bit YCbCr, 4:2:0, the Annex K
// quantisation tables scaled by quality the IJG way and the Annex K
// Huffman tables, so any decoder reads it and quality means what it means
// to image/jpeg. On the test images, sizes come within 0.5% of
// image/jpeg's and decoded PSNR within 0.15 dB (TestFidelity,
// TestDecodes). What makes it fast:
//
//   - Work goes MCU by MCU (16x16 pixels) straight from the RGB24 buffer:
//     colour conversion in 16-bit fixed point, and chroma from the sums of
//     R, G and B over each 2x2 square, one conversion per four pixels (the
//     transform is linear, so that is the average with a single rounding).
//   - The forward DCT is the integer AAN factorisation, 5 multiplies per 8
//     points; its per-coefficient output scale is folded into the
//     quantiser, and quantising is a multiply by a precomputed reciprocal
//     and a shift, unrolled so every index is a constant.
//   - Screens are mostly flat. An MCU of one colour is recognised from its
//     RGB bytes, six word compares a row, and goes out as six DC-only
//     blocks with no conversion or DCT; in other MCUs, a block whose 64
//     samples are equal skips the DCT. Both give exactly the bytes the
//     full path would (TestShortcutsBitIdentical, and FuzzEncode checks it
//     on whatever it finds).
//   - Huffman codes come from lookup tables; the AC coefficients to code
//     are found from a mask of the nonzero ones, so runs of zeros cost
//     nothing; bits collect in a 64-bit accumulator and leave 32 at a
//     time, with the test for 0xff bytes that need stuffing done on the
//     whole word.
//   - Successive frames of one screen mostly repeat. The scan has a restart
//     marker after every row of MCUs, so each row codes from nothing (DC
//     predictions at zero, a byte boundary) and its bytes depend on its
//     pixels alone; an Encoder keeps each row's bytes beside a hash of its
//     pixels and codes again only the rows that changed (one text line:
//     0.23 ms against 3.4 ms for a whole frame). The markers cost two
//     bytes and a partial byte per row (+0.2% on the screen below).
//   - Scratch is kept per Encoder, pooled for Encode; a call into a buffer
//     with room allocates nothing (TestAllocs).
//
// Measured with go test -run '^$' -bench Encode -benchtime 2s -count 5
// ./internal/rgbjpeg/ (medians, two cores, quality 80), on a 1280x800
// screen-like frame (flat desktop, windows with gradient title bars and
// lines of text, about a third of the MCUs not flat) and on one of random
// bytes; image/jpeg includes the RGB24-to-RGBA copy its callers make, and
// the ratios are to rgbjpeg's time:
//
//	               rgbjpeg        image/jpeg       rgbpng
//	screen time    2.5 ms         19.9 ms (7.9x)   3.6 ms (1.4x)
//	screen size    125 KB         125 KB           54 KB
//	noise time     11.5 ms        45.8 ms (4.0x)   1.2 ms (0.1x)
//	noise size     684 KB         684 KB           3.07 MB
//
// rgbpng's deflate gives up on noise and stores it, hence its time there.
package rgbjpeg

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/zeebo/xxh3"
)

// encoder is one call's scratch, pooled.
type encoder struct {
	y      [4][64]int32 // the MCU's luma blocks: top left, top right, bottom left, bottom right
	cb, cr [64]int32
	zz     [64]int32         // a block's quantised coefficients, zigzag order
	edge   [16 * 16 * 3]byte // an MCU past the right or bottom edge, padded
	qt     [2]quantTable     // luma, chroma
	qual   int               // the quality qt was scaled for; 0 before the first call
	dc     [3]int32          // each component's last DC value, for the differences
	bw     bitWriter
	// shortcuts enables the flat-MCU and flat-block shortcuts; tests turn
	// them off to check that the shortcuts change nothing.
	shortcuts bool
}

// Encoder encodes frames, reusing the entropy-coded rows of MCUs of the
// last frame of the same size and quality wherever their pixels are
// unchanged. The scan has a restart marker after each row of MCUs
// (T.81 B.2.4.4: the DC predictions start again from zero and the bits
// from a byte boundary), so a row's bytes depend on its 16 rows of pixels
// alone; a typed letter re-codes one or two rows of a 1280x800 screen.
// The zero value is ready; calls on one Encoder take turns.
type Encoder struct {
	mu   sync.Mutex
	e    encoder
	seed uint64 // random per Encoder: pixels cannot be drawn to collide with a row's hash
	w, h int
	qual int
	fast bool // the shortcuts the cached rows were coded with
	rows []mcuRow
}

// mcuRow is one row of MCUs as the last frame coded it.
type mcuRow struct {
	sum xxh3.Uint128 // of its rows of pixels
	seg []byte       // its entropy-coded segment, byte-aligned; nil: none yet
}

var encoders = sync.Pool{New: func() any { return new(Encoder) }}

// Encode appends the baseline JPEG (JFIF, 8-bit YCbCr, 4:2:0) of the w×h RGB24 image rgb to dst and returns it.
// quality is 1..100 as in the IJG scale (image/jpeg's Options.Quality scale); out of range is an error.
func Encode(dst []byte, rgb []byte, w, h, quality int) ([]byte, error) {
	enc := encoders.Get().(*Encoder)
	defer encoders.Put(enc)
	return enc.encode(dst, rgb, w, h, quality, true)
}

// Encode appends the JPEG of the w×h RGB24 image rgb to dst, as the
// package's Encode does, reusing what it can of the last frame.
func (enc *Encoder) Encode(dst []byte, rgb []byte, w, h, quality int) ([]byte, error) {
	return enc.encode(dst, rgb, w, h, quality, true)
}

// encode is Encode on a fresh Encoder, with the shortcuts as given (tests
// turn them off to compare).
func encode(dst []byte, rgb []byte, w, h, quality int, shortcuts bool) ([]byte, error) {
	return new(Encoder).encode(dst, rgb, w, h, quality, shortcuts)
}

func (enc *Encoder) encode(dst []byte, rgb []byte, w, h, quality int, shortcuts bool) ([]byte, error) {
	if w <= 0 || h <= 0 || w > 65535 || h > 65535 {
		return dst, fmt.Errorf("rgbjpeg: size %dx%d not in 1..65535", w, h)
	}
	if len(rgb) != w*h*3 {
		return dst, fmt.Errorf("rgbjpeg: %d bytes for %dx%d RGB24", len(rgb), w, h)
	}
	if quality < 1 || quality > 100 {
		return dst, fmt.Errorf("rgbjpeg: quality %d not in 1..100", quality)
	}
	enc.mu.Lock()
	defer enc.mu.Unlock()
	e := &enc.e
	if enc.seed == 0 {
		enc.seed = rand.Uint64() | 1
	}
	if e.qual != quality {
		scaleQuant(&e.qt[0], 0, quality)
		scaleQuant(&e.qt[1], 1, quality)
		e.qual = quality
	}
	e.shortcuts = shortcuts
	if enc.w != w || enc.h != h || enc.qual != quality || enc.fast != shortcuts {
		enc.w, enc.h, enc.qual, enc.fast = w, h, quality, shortcuts
		enc.rows = make([]mcuRow, (h+15)/16)
	}
	stride := w * 3
	n := 0
	for i := range enc.rows {
		y := i * 16
		enc.row(&enc.rows[i], rgb, w, h, y, stride)
		n += len(enc.rows[i].seg) + 2
	}

	out := slices.Grow(dst, 1024+n)
	out = e.header(out, w, h)
	for i, r := range enc.rows {
		out = append(out, r.seg...)
		if i < len(enc.rows)-1 {
			out = append(out, 0xff, 0xd0+byte(i%8)) // RSTm
		}
	}
	return append(out, 0xff, 0xd9), nil // EOI
}

// row brings r up to date with the row of MCUs whose top is y: coded
// afresh (DC predictions from zero) unless its pixels hash as before.
func (enc *Encoder) row(r *mcuRow, rgb []byte, w, h, y, stride int) {
	sum := xxh3.Hash128Seed(rgb[y*stride:min(y+16, h)*stride], enc.seed)
	if r.seg != nil && r.sum == sum {
		return
	}
	e := &enc.e
	e.dc = [3]int32{}
	e.bw = bitWriter{buf: r.seg[:0]}
	for x := 0; x < w; x += 16 {
		if x+16 <= w && y+16 <= h {
			e.mcu(rgb[y*stride+x*3:], stride)
		} else {
			e.fillEdge(rgb, w, h, x, y)
			e.mcu(e.edge[:], 16*3)
		}
	}
	r.sum, r.seg = sum, e.bw.finish()
	e.bw.buf = nil
}

// header appends everything up to the entropy-coded data: SOI, APP0 (JFIF
// 1.01, no density, no thumbnail), DQT, SOF0, DHT, DRI and SOS.
func (e *encoder) header(b []byte, w, h int) []byte {
	b = append(b,
		0xff, 0xd8,
		0xff, 0xe0, 0, 16, 'J', 'F', 'I', 'F', 0, 1, 1, 0, 0, 1, 0, 1, 0, 0,
		0xff, 0xdb, 0, 2+2*65, 0)
	b = append(b, e.qt[0].dqt[:]...)
	b = append(b, 1)
	b = append(b, e.qt[1].dqt[:]...)
	// Y samples at 2x2 (table 0), Cb and Cr at 1x1 (table 1).
	b = append(b,
		0xff, 0xc0, 0, 17, 8, byte(h>>8), byte(h), byte(w>>8), byte(w),
		3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1)
	b = append(b, dhtSegment...)
	// A restart interval of one row of MCUs (Encoder).
	ri := (w + 15) / 16
	b = append(b, 0xff, 0xdd, 0, 4, byte(ri>>8), byte(ri))
	// All three components in one scan: Y with the DC/AC tables 0,
	// chroma with tables 1; the whole spectrum, no successive approximation.
	return append(b, 0xff, 0xda, 0, 12, 3, 1, 0x00, 2, 0x11, 3, 0x11, 0, 63, 0)
}

// fillEdge copies the MCU at (x, y), which reaches past the image, into
// e.edge, repeating the last column and row where the image ends; the
// decoder crops them, and repeating keeps the blocks as smooth as the
// image so they cost few bits.
func (e *encoder) fillEdge(rgb []byte, w, h, x, y int) {
	for j := 0; j < 16; j++ {
		row := rgb[min(y+j, h-1)*w*3:]
		for i := 0; i < 16; i++ {
			sx := min(x+i, w-1) * 3
			copy(e.edge[(j*16+i)*3:(j*16+i)*3+3], row[sx:sx+3])
		}
	}
}

// mcu codes the 16x16 pixels at the start of src (rows stride bytes apart):
// four luma blocks, then Cb and Cr.
func (e *encoder) mcu(src []byte, stride int) {
	if e.shortcuts && flatMCU(src, stride) {
		r, g, b := int32(src[0]), int32(src[1]), int32(src[2])
		// As the full path would: each block's fdct output is 64 times its
		// one sample, and only the DC is nonzero.
		y := quant(64*luma(r, g, b), e.qt[0].recip[0])
		cb, cr := chroma(4*r, 4*g, 4*b)
		for range 4 {
			e.bw.dcOnly(y, &e.dc[0], lumaDC, lumaAC)
		}
		e.bw.dcOnly(quant(64*cb, e.qt[1].recip[0]), &e.dc[1], chromaDC, chromaAC)
		e.bw.dcOnly(quant(64*cr, e.qt[1].recip[0]), &e.dc[2], chromaDC, chromaAC)
		return
	}
	e.convert(src, stride)
	for i := range e.y {
		e.block(&e.y[i], &e.qt[0], &e.dc[0], lumaDC, lumaAC)
	}
	e.block(&e.cb, &e.qt[1], &e.dc[1], chromaDC, chromaAC)
	e.block(&e.cr, &e.qt[1], &e.dc[2], chromaDC, chromaAC)
}

// block transforms, quantises and writes one block of samples.
func (e *encoder) block(b *[64]int32, t *quantTable, prev *int32, dc, ac *huffTable) {
	if e.shortcuts && flatBlock(b) {
		e.bw.dcOnly(quant(64*b[0], t.recip[0]), prev, dc, ac)
		return
	}
	fdct(b)
	nz := quantize(&e.zz, b, t)
	e.bw.block(&e.zz, nz, prev, dc, ac)
}

// flatMCU reports whether the 16x16 pixels at src are all the colour of
// the first one. The 48 bytes of a flat row are three 8-byte words twice
// over, so a row is six word compares.
func flatMCU(src []byte, stride int) bool {
	p := uint64(src[0]) | uint64(src[1])<<8 | uint64(src[2])<<16
	w0 := p | p<<24 | p<<48            // r g b r g b r g
	w1 := p>>16 | p<<8 | p<<32 | p<<56 // b r g b r g b r
	w2 := p>>8 | p<<16 | p<<40         // g b r g b r g b
	le := binary.LittleEndian
	for j := 0; j < 16; j++ {
		r := (*[48]byte)(src[j*stride : j*stride+48])
		// ^ and | bind alike in Go: the parentheses matter.
		if (le.Uint64(r[0:])^w0)|(le.Uint64(r[8:])^w1)|(le.Uint64(r[16:])^w2)|
			(le.Uint64(r[24:])^w0)|(le.Uint64(r[32:])^w1)|(le.Uint64(r[40:])^w2) != 0 {
			return false
		}
	}
	return true
}

// flatBlock reports whether all 64 samples of b are equal. It gives up at
// the first row that differs, which for a busy block is the first.
func flatBlock(b *[64]int32) bool {
	v := b[0]
	for r := 0; r < 64; r += 8 {
		p := (*[8]int32)(b[r : r+8])
		if (p[0]^v)|(p[1]^v)|(p[2]^v)|(p[3]^v)|(p[4]^v)|(p[5]^v)|(p[6]^v)|(p[7]^v) != 0 {
			return false
		}
	}
	return true
}

// luma is Y of the JFIF conversion (0.299, 0.587 and 0.114 in 16-bit
// fixed point, which sum to exactly 1) rounded to an 8-bit sample,
// level-shifted, and scaled for fdct.
func luma(r, g, b int32) int32 {
	return (19595*r + 38470*g + 7471*b + 1<<15 - 128<<16) >> 16 << fracBits
}

// chroma is Cb and Cr as luma makes Y, from the sums of R, G and B over a
// 2x2 square: one conversion, one rounding for the square's average. The
// weights of each sum to zero, so JFIF's +128 and the level shift's −128
// cancel; rounding half down keeps the result within −128..127.
func chroma(r4, g4, b4 int32) (cb, cr int32) {
	const round = 1<<17 - 1
	cb = (-11059*r4 - 21709*g4 + 32768*b4 + round) >> 18 << fracBits
	cr = (32768*r4 - 27439*g4 - 5329*b4 + round) >> 18 << fracBits
	return cb, cr
}

// convert fills e.y, e.cb and e.cr from the 16x16 pixels at src, two rows
// at a time so that each 2x2 square's sums for chroma come from the
// pixels already loaded for luma.
func (e *encoder) convert(src []byte, stride int) {
	for j := 0; j < 16; j += 2 {
		s0 := (*[48]byte)(src[j*stride : j*stride+48])
		s1 := (*[48]byte)(src[(j+1)*stride : (j+1)*stride+48])
		top := (j >> 3) << 1
		row := (j & 7) << 3
		cbRow := (*[8]int32)(e.cb[j<<2 : j<<2+8])
		crRow := (*[8]int32)(e.cr[j<<2 : j<<2+8])
		for half := 0; half < 2; half++ {
			blk := &e.y[top+half]
			y0 := (*[8]int32)(blk[row : row+8])
			y1 := (*[8]int32)(blk[row+8 : row+16])
			for i := 0; i < 4; i++ {
				// The &7s tell the compiler the indices are in range.
				k := half*24 + i*6
				p := (*[6]byte)(s0[k : k+6])
				q := (*[6]byte)(s1[k : k+6])
				r00, g00, b00 := int32(p[0]), int32(p[1]), int32(p[2])
				r01, g01, b01 := int32(p[3]), int32(p[4]), int32(p[5])
				r10, g10, b10 := int32(q[0]), int32(q[1]), int32(q[2])
				r11, g11, b11 := int32(q[3]), int32(q[4]), int32(q[5])
				y0[2*i&7] = luma(r00, g00, b00)
				y0[(2*i+1)&7] = luma(r01, g01, b01)
				y1[2*i&7] = luma(r10, g10, b10)
				y1[(2*i+1)&7] = luma(r11, g11, b11)
				cb, cr := chroma(r00+r01+r10+r11, g00+g01+g10+g11, b00+b01+b10+b11)
				cbRow[(half*4+i)&7] = cb
				crRow[(half*4+i)&7] = cr
			}
		}
	}
}
