package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/shinken-rl/shinken/guest/wire"
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
