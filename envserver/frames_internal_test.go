package envserver

import (
	"bytes"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// TestFrameCacheKeepsRawCompressed: a raw frame is held S2-compressed (so
// far less than its size counts against the budget), every read gives back
// the same bytes in a copy of its own, and other encodings are held as
// given.
func TestFrameCacheKeepsRawCompressed(t *testing.T) {
	// A screen-like 1280x800 RGB24 frame: flat, with a few bars.
	raw := bytes.Repeat([]byte{0x20, 0x30, 0x40}, 1280*800)
	for y := 100; y < 140; y++ {
		for x := 0; x < 1280; x++ {
			copy(raw[(y*1280+x)*3:], []byte{byte(x), byte(y), 0xee})
		}
	}
	c := newFrameCache(int64(len(raw))) // one raw frame's worth
	rk := frameKey{hash: "aa", format: aci.FormatRaw}
	pk := frameKey{hash: "bb", format: aci.FormatPNG}
	png := []byte("\x89PNG as given")

	stored := c.put(rk, raw)
	if len(stored) == 0 || len(stored) > len(raw)/10 {
		t.Fatalf("raw frame stored in %d bytes; want it compressed (< %d)", len(stored), len(raw)/10)
	}
	if got := c.put(pk, png); !bytes.Equal(got, png) {
		t.Fatalf("png stored as %q; want it as given", got)
	}
	if _, held := c.stats(); held != int64(len(stored)+len(png)) {
		t.Errorf("cache holds %d bytes; want %d (the compressed raw frame and the png)", held, len(stored)+len(png))
	}

	b := &batch{}
	got, ok := b.cached(c, rk)
	if !ok || !bytes.Equal(got, raw) {
		t.Fatalf("get raw: ok %v, equal %v", ok, bytes.Equal(got, raw))
	}
	got[0] ^= 0xff // a reader's copy is its own
	if again, _ := b.cached(c, rk); !bytes.Equal(again, raw) {
		t.Error("changing one read's bytes changed the cached frame")
	}
	if s, ok := c.getStored(rk); !ok || !bytes.Equal(s, stored) {
		t.Error("getStored does not give the stored form")
	} else if back, ok := decodeStored(aci.FormatRaw, s, true); !ok || !bytes.Equal(back, raw) {
		t.Error("decodeStored does not give the raw frame back")
	}
	if got, format, ok := c.peekHash("aa", api.Observe{Format: aci.FormatPNG}); !ok || format != aci.FormatRaw || !bytes.Equal(got, raw) {
		t.Errorf("peekHash raw: ok %v, format %q, equal %v", ok, format, bytes.Equal(got, raw))
	}
	if got, ok := b.cached(c, pk); !ok || !bytes.Equal(got, png) {
		t.Errorf("get png: %q, %v", got, ok)
	}
	// Corrupt stored bytes read as a miss, never as a frame.
	c.lru.Put(frameKey{hash: "cc", format: aci.FormatRaw}, []byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	if _, ok := b.cached(c, frameKey{hash: "cc", format: aci.FormatRaw}); ok {
		t.Error("a corrupt stored raw frame was read as a hit")
	}
	if len(b.lent) != 2 {
		t.Errorf("the batch lent %d buffers for two raw reads; want 2", len(b.lent))
	}
	(&batchReply{b: b}).release()
	if len(b.lent) != 0 {
		t.Error("release kept lent buffers")
	}
}
