package rgbjpeg

import "math"

// Samples enter the DCT level-shifted (−128..127) and scaled up by
// 2^fracBits so that the rounding in the fixed-point multiplies below stays
// well under a quantiser step even at quality 100 (TestFDCTAccuracy). With
// 4 bits, the largest product in the column pass is below 2^30 for any
// input (the sum of the absolute weights of its operand, times 2048, times
// the constant), so int32 arithmetic is enough.
const fracBits = 4

// The four multipliers of the AAN factorisation in 13-bit fixed point
// (round(x·2^13)).
const (
	constBits = 13
	fixC6     = 3135  // cos(6π/16) = 0.382683433
	fixC2mC6  = 4433  // cos(2π/16) − cos(6π/16) = 0.541196100
	fixC4     = 5793  // cos(4π/16) = 0.707106781
	fixC2pC6  = 10703 // cos(2π/16) + cos(6π/16) = 1.306562965
)

func mul(x, c int32) int32 { return (x*c + 1<<(constBits-1)) >> constBits }

// fdct is the forward DCT of T.81 A.3.3, in place, rows first and then
// columns, each an 8-point AAN transform (Arai, Agui and Nakajima 1988):
// 5 multiplies per 8 points instead of the 11–12 of an exact factorisation,
// because each output comes out multiplied by a known factor that the
// quantiser can absorb at no cost. Output u*8+v is
// 8·s(u)·s(v)·2^fracBits·F(u,v), with s(0) = 1 and s(k) = √2·cos(kπ/16)
// (aanScale); the quantisation tables fold that in.
//
// A block whose samples are all equal comes out as 64 times the sample in
// position 0 and exact zeros elsewhere: every AC output is built from
// differences of inputs, and mul(0, c) is 0. The flat-block shortcut
// relies on that.
func fdct(b *[64]int32) {
	for r := 0; r < 64; r += 8 {
		p := (*[8]int32)(b[r : r+8])
		t0, t7 := p[0]+p[7], p[0]-p[7]
		t1, t6 := p[1]+p[6], p[1]-p[6]
		t2, t5 := p[2]+p[5], p[2]-p[5]
		t3, t4 := p[3]+p[4], p[3]-p[4]

		e0, e3 := t0+t3, t0-t3
		e1, e2 := t1+t2, t1-t2
		p[0] = e0 + e1
		p[4] = e0 - e1
		z1 := mul(e2+e3, fixC4)
		p[2] = e3 + z1
		p[6] = e3 - z1

		o0, o1, o2 := t4+t5, t5+t6, t6+t7
		z5 := mul(o0-o2, fixC6)
		z2 := mul(o0, fixC2mC6) + z5
		z4 := mul(o2, fixC2pC6) + z5
		z3 := mul(o1, fixC4)
		z11, z13 := t7+z3, t7-z3
		p[5] = z13 + z2
		p[3] = z13 - z2
		p[1] = z11 + z4
		p[7] = z11 - z4
	}
	for c := 0; c < 8; c++ {
		d0, d1, d2, d3 := b[c], b[c+8], b[c+16], b[c+24]
		d4, d5, d6, d7 := b[c+32], b[c+40], b[c+48], b[c+56]
		t0, t7 := d0+d7, d0-d7
		t1, t6 := d1+d6, d1-d6
		t2, t5 := d2+d5, d2-d5
		t3, t4 := d3+d4, d3-d4

		e0, e3 := t0+t3, t0-t3
		e1, e2 := t1+t2, t1-t2
		b[c] = e0 + e1
		b[c+32] = e0 - e1
		z1 := mul(e2+e3, fixC4)
		b[c+16] = e3 + z1
		b[c+48] = e3 - z1

		o0, o1, o2 := t4+t5, t5+t6, t6+t7
		z5 := mul(o0-o2, fixC6)
		z2 := mul(o0, fixC2mC6) + z5
		z4 := mul(o2, fixC2pC6) + z5
		z3 := mul(o1, fixC4)
		z11, z13 := t7+z3, t7-z3
		b[c+40] = z13 + z2
		b[c+24] = z13 - z2
		b[c+8] = z11 + z4
		b[c+56] = z11 - z4
	}
}

// zigzag maps a position in the zigzag scan (T.81 Figure A.6) to its index
// in the row-major block.
var zigzag = [64]uint8{
	0, 1, 8, 16, 9, 2, 3, 10,
	17, 24, 32, 25, 18, 11, 4, 5,
	12, 19, 26, 33, 40, 48, 41, 34,
	27, 20, 13, 6, 7, 14, 21, 28,
	35, 42, 49, 56, 57, 50, 43, 36,
	29, 22, 15, 23, 30, 37, 44, 51,
	58, 59, 52, 45, 38, 31, 39, 46,
	53, 60, 61, 54, 47, 55, 62, 63,
}

// The quantisation tables of T.81 Annex K.1 (Tables K.1 and K.2), row-major;
// quality scales them.
var baseQuant = [2][64]uint8{
	{
		16, 11, 10, 16, 24, 40, 51, 61,
		12, 12, 14, 19, 26, 58, 60, 55,
		14, 13, 16, 24, 40, 57, 69, 56,
		14, 17, 22, 29, 51, 87, 80, 62,
		18, 22, 37, 56, 68, 109, 103, 77,
		24, 35, 55, 64, 81, 104, 113, 92,
		49, 64, 78, 87, 103, 121, 120, 101,
		72, 92, 95, 98, 112, 100, 103, 99,
	},
	{
		17, 18, 24, 47, 99, 99, 99, 99,
		18, 21, 26, 66, 99, 99, 99, 99,
		24, 26, 56, 99, 99, 99, 99, 99,
		47, 66, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
		99, 99, 99, 99, 99, 99, 99, 99,
	},
}

// quantTable is one component's quantiser for one quality.
type quantTable struct {
	// dqt is the table as DQT carries it: zigzag order, scaled by quality.
	dqt [64]uint8
	// recip[i] is 2^32 divided by the whole divisor of zigzag position i:
	// the DQT value times the fdct's output scale there. Dividing becomes
	// a multiply and a shift.
	recip [64]uint32
}

// aanScale is s(k) of fdct's output scale.
func aanScale(k int) float64 {
	if k == 0 {
		return 1
	}
	return math.Sqrt2 * math.Cos(float64(k)*math.Pi/16)
}

// scaleQuant fills t for quality q (1..100) and component c (0 luma, 1
// chroma) the IJG way, as libjpeg and image/jpeg do: quality 50 is Annex K
// as printed, lower qualities divide it by q/50 and higher ones scale it by
// (100−q)/50; entries are clamped to 1..255 so they fit baseline's 8 bits.
func scaleQuant(t *quantTable, c, q int) {
	scale := 200 - 2*q
	if q < 50 {
		scale = 5000 / q
	}
	for i, n := range zigzag {
		v := (int(baseQuant[c][n])*scale + 50) / 100
		v = min(max(v, 1), 255)
		t.dqt[i] = uint8(v)
		d := float64(v) * 8 * aanScale(int(n/8)) * aanScale(int(n%8)) * (1 << fracBits)
		t.recip[i] = uint32(math.Round((1 << 32) / d))
	}
}

// quant divides v by the divisor whose reciprocal is r, rounding to
// nearest. Signed multiply and arithmetic shift round halves up rather
// than away from zero; with a reciprocal of an irrational divisor, exact
// halves do not occur anyway.
func quant(v int32, r uint32) int32 {
	return int32((int64(v)*int64(r) + 1<<31) >> 32)
}

// quantize divides the fdct output b by t into zz in zigzag order and
// returns a mask with bit k set where zz[k] is not zero.
//
// It is written out for all 64 positions: with every index and shift a
// constant, a coefficient costs about ten instructions instead of the
// thirty of a loop over the zigzag table.
func quantize(zz *[64]int32, b *[64]int32, t *quantTable) uint64 {
	return qz(zz, b, t, 0, 0) | qz(zz, b, t, 1, 1) | qz(zz, b, t, 2, 8) | qz(zz, b, t, 3, 16) | qz(zz, b, t, 4, 9) | qz(zz, b, t, 5, 2) | qz(zz, b, t, 6, 3) | qz(zz, b, t, 7, 10) |
		qz(zz, b, t, 8, 17) | qz(zz, b, t, 9, 24) | qz(zz, b, t, 10, 32) | qz(zz, b, t, 11, 25) | qz(zz, b, t, 12, 18) | qz(zz, b, t, 13, 11) | qz(zz, b, t, 14, 4) | qz(zz, b, t, 15, 5) |
		qz(zz, b, t, 16, 12) | qz(zz, b, t, 17, 19) | qz(zz, b, t, 18, 26) | qz(zz, b, t, 19, 33) | qz(zz, b, t, 20, 40) | qz(zz, b, t, 21, 48) | qz(zz, b, t, 22, 41) | qz(zz, b, t, 23, 34) |
		qz(zz, b, t, 24, 27) | qz(zz, b, t, 25, 20) | qz(zz, b, t, 26, 13) | qz(zz, b, t, 27, 6) | qz(zz, b, t, 28, 7) | qz(zz, b, t, 29, 14) | qz(zz, b, t, 30, 21) | qz(zz, b, t, 31, 28) |
		qz(zz, b, t, 32, 35) | qz(zz, b, t, 33, 42) | qz(zz, b, t, 34, 49) | qz(zz, b, t, 35, 56) | qz(zz, b, t, 36, 57) | qz(zz, b, t, 37, 50) | qz(zz, b, t, 38, 43) | qz(zz, b, t, 39, 36) |
		qz(zz, b, t, 40, 29) | qz(zz, b, t, 41, 22) | qz(zz, b, t, 42, 15) | qz(zz, b, t, 43, 23) | qz(zz, b, t, 44, 30) | qz(zz, b, t, 45, 37) | qz(zz, b, t, 46, 44) | qz(zz, b, t, 47, 51) |
		qz(zz, b, t, 48, 58) | qz(zz, b, t, 49, 59) | qz(zz, b, t, 50, 52) | qz(zz, b, t, 51, 45) | qz(zz, b, t, 52, 38) | qz(zz, b, t, 53, 31) | qz(zz, b, t, 54, 39) | qz(zz, b, t, 55, 46) |
		qz(zz, b, t, 56, 53) | qz(zz, b, t, 57, 60) | qz(zz, b, t, 58, 61) | qz(zz, b, t, 59, 54) | qz(zz, b, t, 60, 47) | qz(zz, b, t, 61, 55) | qz(zz, b, t, 62, 62) | qz(zz, b, t, 63, 63)
}

// qz quantises fdct output n into zigzag position i and returns the
// position's bit of the nonzero mask.
func qz(zz *[64]int32, b *[64]int32, t *quantTable, i, n int) uint64 {
	q := quant(b[n], t.recip[i])
	zz[i] = q
	return uint64(q|-q) >> 63 << i
}
