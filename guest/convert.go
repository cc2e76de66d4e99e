package guest

import (
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/rgbs2"
	"github.com/zeebo/xxh3"
)

// rgbCache is the last capture converted to RGB24, beside a hash of each
// source row it came from. A step mostly redraws a few rows (a typed letter
// redraws one text line), so the next capture of the same geometry converts
// only the output rows whose source rows changed: hashing a row costs a
// fraction of converting it (docs/architecture.md, "Cost of a step"). The
// hash is seeded at random per display, so an agent cannot draw a row chosen
// to collide with the one it replaces.
type rgbCache struct {
	seed     uint64
	src      aci.Rect
	ow, oh   int
	rows     []xxh3.Uint128 // hash of each source row behind rgb
	rgb      []byte         // nil: nothing converted yet
	hash     string         // FrameHash(rgb); "" until taken
	dirty    []bool         // scratch: source rows changed by this capture
	ver      []uint64       // per band of rgbs2.BandRows output rows: changed when any of its rows is converted
	verSeq   uint64         // the last version given out; never reset, so no two contents share one
	sumVer   []uint64       // per band: the version its part of the frame hash was taken at
	bandSums []byte         // per band: its part of the frame hash (bandHash), 16 bytes each
	xs       []int          // scaled: first source column of each output column
	sums     []uint32       // scaled: one output row's channel sums
}

// update brings c.rgb up to date with the capture bgrx (rows of stride
// bytes) of src delivered at ow×oh, area-averaging when the size shrinks,
// and reports whether any output row was converted. With damaged set (one
// flag per source row), only those rows are hashed and compared: the others
// are known unchanged since the last update (capture.go, from DAMAGE).
func (c *rgbCache) update(bgrx []byte, stride int, src aci.Rect, ow, oh int, damaged []bool) bool {
	w, h := src.W, src.H
	fresh := c.rgb == nil || c.src != src || c.ow != ow || c.oh != oh
	if fresh {
		if c.seed == 0 {
			c.seed = rand.Uint64() | 1
		}
		c.src, c.ow, c.oh, c.hash = src, ow, oh, ""
		c.rgb = grow(c.rgb, ow*oh*3)
		c.rows = grow(c.rows, h)
		c.dirty = grow(c.dirty, h)
		c.ver = grow(c.ver, rgbs2.Bands(oh))
	}
	any := false
	if fresh || len(damaged) != h {
		damaged = nil
	}
	for y := range h {
		if damaged != nil && !damaged[y] {
			c.dirty[y] = false
			continue
		}
		sum := xxh3.Hash128Seed(bgrx[y*stride:y*stride+w*4], c.seed)
		c.dirty[y] = fresh || sum != c.rows[y]
		c.rows[y] = sum
		any = any || c.dirty[y]
	}
	if !any {
		return false
	}
	c.hash = ""
	c.verSeq++
	if ow == w && oh == h {
		for y0 := 0; y0 < h; {
			if !c.dirty[y0] {
				y0++
				continue
			}
			y1 := y0 + 1
			for y1 < h && c.dirty[y1] {
				y1++
			}
			convertRows(c.rgb, bgrx, stride, w, y0, y1)
			c.changed(y0, y1)
			y0 = y1
		}
		return true
	}
	if fresh {
		c.xs = grow(c.xs, ow+1)
		for i := range c.xs {
			c.xs[i] = i * w / ow
		}
		c.sums = grow(c.sums, ow*3)
	}
	for oy := range oh {
		y0, y1 := oy*h/oh, max((oy+1)*h/oh, oy*h/oh+1)
		for y := y0; y < y1; y++ {
			if c.dirty[y] {
				c.scaleRow(bgrx, stride, oy, y0, y1)
				c.changed(oy, oy+1)
				break
			}
		}
	}
	return true
}

// changed gives the bands of output rows [y0, y1) the current version.
func (c *rgbCache) changed(y0, y1 int) {
	for b := y0 / rgbs2.BandRows; b <= (y1-1)/rgbs2.BandRows; b++ {
		c.ver[b] = c.verSeq
	}
}

// grow returns s resized to n, reusing its array when it is large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// scaleRow writes output row oy, the box average of source rows [y0, y1).
func (c *rgbCache) scaleRow(bgrx []byte, stride, oy, y0, y1 int) {
	ow, xs, sums := c.ow, c.xs, c.sums
	clear(sums)
	for y := y0; y < y1; y++ {
		row := bgrx[y*stride:]
		for ox := range ow {
			x0, x1 := xs[ox], max(xs[ox+1], xs[ox]+1)
			var r, g, b uint32
			for x := x0; x < x1; x++ {
				p := row[x*4 : x*4+3]
				b += uint32(p[0])
				g += uint32(p[1])
				r += uint32(p[2])
			}
			sums[ox*3] += r
			sums[ox*3+1] += g
			sums[ox*3+2] += b
		}
	}
	d := c.rgb[oy*ow*3:]
	for ox := range ow {
		n := uint32((y1 - y0) * (max(xs[ox+1], xs[ox]+1) - xs[ox]))
		d[ox*3] = byte((sums[ox*3] + n/2) / n)
		d[ox*3+1] = byte((sums[ox*3+1] + n/2) / n)
		d[ox*3+2] = byte((sums[ox*3+2] + n/2) / n)
	}
}

// frameHash is FrameHash of c.rgb, computed once per change and, within it,
// hashing again only the bands whose rows changed.
func (c *rgbCache) frameHash() string {
	if c.hash != "" {
		return c.hash
	}
	n := len(c.ver)
	c.sumVer, c.bandSums = grow(c.sumVer, n), grow(c.bandSums, 16*n)
	stride := c.ow * 3
	for i, v := range c.ver {
		if c.sumVer[i] != v || v == 0 {
			sum := bandHash(c.rgb[i*rgbs2.BandRows*stride : min((i+1)*rgbs2.BandRows, c.oh)*stride])
			copy(c.bandSums[16*i:], sum[:])
			c.sumVer[i] = v
		}
	}
	c.hash = frameHashOf(c.bandSums, c.ow, c.oh)
	return c.hash
}

// convertRows converts rows [y0, y1) of BGRX to RGB24, four pixels (16 bytes
// in, 12 out) per step.
func convertRows(dst, src []byte, stride, w, y0, y1 int) {
	for y := y0; y < y1; y++ {
		s := src[y*stride : y*stride+w*4]
		d := dst[y*w*3 : (y+1)*w*3]
		i, j := 0, 0
		for ; i+16 <= len(s) && j+12 <= len(d); i, j = i+16, j+12 {
			in := s[i : i+16 : i+16]
			c0 := rgbOf(binary.LittleEndian.Uint32(in[0:4]))
			c1 := rgbOf(binary.LittleEndian.Uint32(in[4:8]))
			c2 := rgbOf(binary.LittleEndian.Uint32(in[8:12]))
			c3 := rgbOf(binary.LittleEndian.Uint32(in[12:16]))
			out := d[j : j+12 : j+12]
			binary.LittleEndian.PutUint32(out[0:4], c0|c1<<24)
			binary.LittleEndian.PutUint32(out[4:8], c1>>8|c2<<16)
			binary.LittleEndian.PutUint32(out[8:12], c2>>16|c3<<8)
		}
		for ; i+4 <= len(s); i, j = i+4, j+3 {
			d[j], d[j+1], d[j+2] = s[i+2], s[i+1], s[i]
		}
	}
}

// rgbOf turns a BGRX pixel read as a little-endian uint32 (0xXXRRGGBB) into
// the 24-bit little-endian value of its R, G, B bytes.
func rgbOf(p uint32) uint32 {
	return (p>>16)&0xff | p&0xff00 | (p&0xff)<<16
}

// FrameHash is the frame identity, as 32 lowercase hex chars: XXH3-128,
// the dimensions folded into the seed, of the XXH3-128s of the frame's bands
// of rgbs2.BandRows rows of RGB24 bytes. Hashed by bands, a frame whose text
// line changed is hashed again only where it changed (rgbCache.frameHash).
func FrameHash(rgb []byte, w, h int) string {
	stride := w * 3
	sums := make([]byte, 0, 16*rgbs2.Bands(h))
	for i := range rgbs2.Bands(h) {
		sum := bandHash(rgb[i*rgbs2.BandRows*stride : min((i+1)*rgbs2.BandRows, h)*stride])
		sums = append(sums, sum[:]...)
	}
	return frameHashOf(sums, w, h)
}

// bandHash is one band's part of FrameHash.
func bandHash(px []byte) [16]byte { return xxh3.Hash128(px).Bytes() }

// frameHashOf is FrameHash from the bands' hashes.
func frameHashOf(sums []byte, w, h int) string {
	sum := xxh3.Hash128Seed(sums, uint64(w)<<32|uint64(h)).Bytes()
	return hex.EncodeToString(sum[:])
}
