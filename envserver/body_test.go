package envserver

import (
	"bytes"
	"io"
	"testing"

	"github.com/shinken-rl/shinken/envserver/api"
)

// The streamed body must be byte for byte the reply's encoding, whichever
// way fasthttp reads it, and hand the frames' buffers back exactly once.
func TestSplicedBodyIsTheEncoding(t *testing.T) {
	big := bytes.Repeat([]byte{7, 8, 9}, 1<<20)
	big2 := bytes.Repeat([]byte{1}, spliceMin)
	rep := &api.BatchReply{Frames: map[string][]byte{"a": big, "b": []byte("small png"), "c": big2}}
	want, err := api.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	for _, viaRead := range []bool{false, true} {
		done := 0
		b := newSplicedBody(func() { done++ })
		if err := api.MarshalTo(b, rep); err != nil {
			t.Fatal(err)
		}
		if len(b.parts) != 2 || b.n != len(want) {
			t.Fatalf("%d referenced parts, %d bytes; want the two large frames and %d bytes", len(b.parts), b.n, len(want))
		}
		var got bytes.Buffer
		if viaRead {
			_, err = io.CopyBuffer(&got, struct{ io.Reader }{b}, make([]byte, 1000))
		} else {
			_, err = b.WriteTo(&got)
		}
		if err != nil || !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("read=%v: streamed body differs from the encoding (err %v)", viaRead, err)
		}
		b.Close()
		if done != 1 {
			t.Fatalf("done ran %d times", done)
		}
	}
}
