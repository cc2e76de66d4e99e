package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbs2"
)

// TestReadFrameAllocatesWhatArrives: a peer that declares a frame of
// MaxFrame and sends a few bytes makes the reader allocate in proportion to
// what arrived, not to the declared length.
func TestReadFrameAllocatesWhatArrives(t *testing.T) {
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], wire.MaxFrame)
	in := append(hdr[:], make([]byte, 1000)...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := wire.ReadFrame(bytes.NewReader(in), nil)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: got %v; want unexpected EOF", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("a truncated %d-byte frame allocated %d bytes; want about what arrived", wire.MaxFrame, got)
	}
	// Whole frames, small and large, still read back intact.
	for _, n := range []int{0, 10, 200 << 10, 3 << 20} {
		body := bytes.Repeat([]byte{7}, n)
		var b bytes.Buffer
		if err := wire.WriteFrame(&b, body); err != nil {
			t.Fatal(err)
		}
		got, err := wire.ReadFrame(&b, nil)
		if err != nil || !bytes.Equal(got, body) {
			t.Errorf("frame of %d bytes: got %d bytes, %v", n, len(got), err)
		}
	}
}

// TestCheckShotRawS2Size: a guest's raws2 frame must declare exactly the
// bytes of its dimensions, so that a hostile guest cannot make the host
// decode (allocate) more than the frame it names, or deliver a frame of
// another shape under a hash.
func TestCheckShotRawS2Size(t *testing.T) {
	hash := strings.Repeat("ab", 16)
	rgb := bytes.Repeat([]byte{1, 2, 3}, 64*48)
	shot := func(w, h int, data []byte) *wire.Shot {
		return &wire.Shot{Hash: hash, W: w, H: h, Format: wire.FormatRawS2, Data: data}
	}
	if err := wire.CheckShot(shot(64, 48, s2.Encode(nil, rgb))); err != nil {
		t.Fatalf("a well-formed raws2 frame: %v", err)
	}
	for name, s := range map[string]*wire.Shot{
		"declares more than its size": shot(64, 47, s2.Encode(nil, rgb)),
		"declares less than its size": shot(64, 49, s2.Encode(nil, rgb)),
		"no dimensions":               shot(0, 0, s2.Encode(nil, nil)),
		"beyond any screen":           shot(1<<15, 1, s2.Encode(nil, rgb)),
		"not s2":                      shot(64, 48, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0x0f}),
	} {
		if err := wire.CheckShot(s); err == nil {
			t.Errorf("raws2 frame that %s was accepted", name)
		}
	}
}

// A guest's band table is checked too: the host patches kept frames by it
// (envserver/rawframe.go), so bands of another height, too few or too many,
// or lengths that do not cover the block are refused on arrival.
func TestCheckShotRawS2Bands(t *testing.T) {
	hash := strings.Repeat("ab", 16)
	rgb := bytes.Repeat([]byte{1, 2, 3}, 64*48)
	var e rgbs2.Encoder
	ver := []uint64{1, 1, 1}
	blk, lens, err := e.Encode(nil, rgb, 64, 48, ver)
	if err != nil {
		t.Fatal(err)
	}
	shot := func(rows int, lens []int) *wire.Shot {
		return &wire.Shot{Hash: hash, W: 64, H: 48, Format: wire.FormatRawS2, Data: blk, BandRows: rows, Bands: lens}
	}
	if err := wire.CheckShot(shot(rgbs2.BandRows, lens)); err != nil {
		t.Fatalf("a well-formed banded raws2 frame: %v", err)
	}
	for name, s := range map[string]*wire.Shot{
		"bands of another height":   shot(8, lens),
		"too few bands":             shot(rgbs2.BandRows, lens[:2]),
		"too many bands":            shot(rgbs2.BandRows, append(append([]int(nil), lens...), 0)),
		"lengths past the block":    shot(rgbs2.BandRows, []int{lens[0], lens[1], lens[2] + 1}),
		"lengths short of it":       shot(rgbs2.BandRows, []int{lens[0], lens[1], lens[2] - 1}),
		"a negative length":         shot(rgbs2.BandRows, []int{-1, lens[1] + 1, lens[2]}),
		"a band table without rows": shot(0, lens),
	} {
		if err := wire.CheckShot(s); err == nil {
			t.Errorf("raws2 frame with %s was accepted", name)
		}
	}
}
