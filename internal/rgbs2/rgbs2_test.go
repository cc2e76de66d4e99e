package rgbs2

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/s2"
)

// screen returns a w×h frame like a desktop's: flat background, a few
// rectangles, text-like noise in some rows.
func screen(r *rand.Rand, w, h int) []byte {
	px := bytes.Repeat([]byte{0xf0, 0xf0, 0xe8}, w*h)
	for range 4 {
		x0, y0 := r.IntN(w), r.IntN(h)
		x1, y1 := min(w, x0+r.IntN(w/2+1)), min(h, y0+r.IntN(h/2+1))
		c := []byte{byte(r.Uint32()), byte(r.Uint32()), byte(r.Uint32())}
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				copy(px[(y*w+x)*3:], c)
			}
		}
	}
	for range 3 {
		y := r.IntN(h)
		for x := range w {
			if r.IntN(3) == 0 {
				px[(y*w+x)*3] = byte(r.Uint32())
			}
		}
	}
	return px
}

// bump marks the bands rows [y0, y1) fall in as changed.
func bump(ver []uint64, y0, y1 int, v uint64) {
	for b := y0 / BandRows; b <= (y1-1)/BandRows; b++ {
		ver[b] = v
	}
}

func TestEncodeIsOneS2BlockAndPatches(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, sz := range [][2]int{{1280, 800}, {37, 1}, {5, 17}, {64, 33}, {333, 250}} {
		w, h := sz[0], sz[1]
		var e Encoder
		px := screen(r, w, h)
		ver := make([]uint64, Bands(h))
		for i := range ver {
			ver[i] = 1
		}
		var kept, keptBlk []byte
		var keptOffs []int
		for step := range 30 {
			blk, lens, err := e.Encode(nil, px, w, h, ver)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s2.Decode(nil, blk)
			if err != nil || !bytes.Equal(got, px) {
				t.Fatalf("%dx%d step %d: the whole block decodes to other pixels (err %v)", w, h, step, err)
			}
			offs, err := Split(blk, lens, nil)
			if err != nil {
				t.Fatalf("%dx%d step %d: %v", w, h, step, err)
			}
			if kept == nil {
				kept = make([]byte, len(px))
			}
			if _, err := Patch(kept, w, h, keptBlk, keptOffs, blk, offs, nil); err != nil {
				t.Fatalf("%dx%d step %d: patch: %v", w, h, step, err)
			}
			if !bytes.Equal(kept, px) {
				t.Fatalf("%dx%d step %d: patched frame differs from the pixels", w, h, step)
			}
			keptBlk, keptOffs = blk, offs
			// Change a few rows (a typed letter), or now and then all.
			v := uint64(step + 2)
			if step%7 == 6 {
				px = screen(r, w, h)
				bump(ver, 0, h, v)
				continue
			}
			y0 := r.IntN(h)
			y1 := min(h, y0+1+r.IntN(20))
			for y := y0; y < y1; y++ {
				px[(y*w+r.IntN(w))*3+1] ^= 0x5a
			}
			bump(ver, y0, y1, v)
		}
	}
}

// A stale version is the caller's promise broken, and the output shows the
// old band: versions, not pixels, decide what is compressed again.
func TestEncodeTrustsVersions(t *testing.T) {
	w, h := 8, 40
	px := bytes.Repeat([]byte{1, 2, 3}, w*h)
	ver := []uint64{1, 1, 1}
	var e Encoder
	if _, _, err := e.Encode(nil, px, w, h, ver); err != nil {
		t.Fatal(err)
	}
	px[20*w*3] = 99 // band 1
	blk, _, _ := e.Encode(nil, px, w, h, ver)
	if got, _ := s2.Decode(nil, blk); got[20*w*3] != 1 {
		t.Fatal("an unchanged version was compressed again")
	}
	ver[1] = 2
	blk, _, _ = e.Encode(nil, px, w, h, ver)
	if got, _ := s2.Decode(nil, blk); !bytes.Equal(got, px) {
		t.Fatal("a changed version was not compressed again")
	}
}

// The attack: a guest's block whose second band copies from the first is a
// valid S2 block, but that band does not stand alone; patching must refuse
// it rather than keep a band whose pixels depend on its neighbour.
func TestPatchRefusesBandsThatDoNotStandAlone(t *testing.T) {
	w, h := 4, 32 // two bands of 192 bytes
	band0 := make([]byte, BandRows*w*3)
	for i := range band0 {
		band0[i] = byte(i * 7)
	}
	b0 := s2.Encode(nil, band0)
	_, hdr := binary.Uvarint(b0)
	el0 := b0[hdr:]
	// Band 1: three copies of 64 bytes from 192 bytes back.
	el1 := []byte{63<<2 | 2, 192, 0, 63<<2 | 2, 192, 0, 63<<2 | 2, 192, 0}
	blk := binary.AppendUvarint(nil, uint64(w*h*3))
	blk = append(append(blk, el0...), el1...)
	whole, err := s2.Decode(nil, blk)
	if err != nil || !bytes.Equal(whole, append(append([]byte(nil), band0...), band0...)) {
		t.Fatalf("the crafted block is not what it should be (err %v)", err)
	}
	offs, err := Split(blk, []int{len(el0), len(el1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Patch(make([]byte, w*h*3), w, h, nil, nil, blk, offs, nil); err == nil {
		t.Fatal("a band that copies from its neighbour was patched in")
	}
}

func TestSplitChecksLengths(t *testing.T) {
	var e Encoder
	w, h := 10, 20
	ver := []uint64{1, 1}
	blk, lens, err := e.Encode(nil, make([]byte, w*h*3), w, h, ver)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]int{{lens[0]}, {lens[0], lens[1] + 1}, {lens[0] + lens[1], 0, 1}, {-1, lens[0] + lens[1] + 1}} {
		if _, err := Split(blk, bad, nil); err == nil {
			t.Errorf("lengths %v for a block of bands %v accepted", bad, lens)
		}
	}
}

func BenchmarkEncodeOneLine(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	w, h := 1280, 800
	px := screen(r, w, h)
	ver := make([]uint64, Bands(h))
	for i := range ver {
		ver[i] = 1
	}
	var e Encoder
	dst := make([]byte, 0, s2.MaxEncodedLen(len(px)))
	for i := 0; b.Loop(); i++ {
		ver[(i*3)%len(ver)] = uint64(i + 2)
		dst, _, _ = e.Encode(dst[:0], px, w, h, ver)
	}
}

func BenchmarkS2Whole(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	px := screen(r, 1280, 800)
	dst := make([]byte, s2.MaxEncodedLen(len(px)))
	for b.Loop() {
		s2.Encode(dst, px)
	}
}
