package envserver

import (
	"bytes"
	"io"
	"sync"
)

// splicedBody is a reply's msgpack encoding in which every large byte string
// (a frame) is referenced, not copied: fasthttp streams it to the connection,
// writing each frame straight from the buffer it lives in. A raw frame is
// three megabytes, and copying it into the response body cost about half a
// millisecond a step (docs/architecture.md, "Cost of a step"). The frames
// must not change until the body is written; close then runs done, which
// hands their buffers back (batchReply.release).
type splicedBody struct {
	buf   []byte // the encoding less the referenced strings
	parts []splicePart
	n     int // total length
	done  func()
	rd    io.Reader // Read's progress
}

// splicePart is a referenced string, which comes after buf[:at].
type splicePart struct {
	at  int
	ext []byte
}

// spliceMin is the smallest write referenced rather than copied.
const spliceMin = 64 << 10

var splicedBodies = sync.Pool{New: func() any { return new(splicedBody) }}

func newSplicedBody(done func()) *splicedBody {
	b := splicedBodies.Get().(*splicedBody)
	b.done = done
	return b
}

func (b *splicedBody) Write(p []byte) (int, error) {
	if len(p) >= spliceMin {
		b.parts = append(b.parts, splicePart{at: len(b.buf), ext: p})
	} else {
		b.buf = append(b.buf, p...)
	}
	b.n += len(p)
	return len(p), nil
}

// WriteByte makes the body msgpack's own writer (no buffering in between).
func (b *splicedBody) WriteByte(c byte) error {
	b.buf = append(b.buf, c)
	b.n++
	return nil
}

// SupportsBodyWriteTo tells fasthttp to use WriteTo.
func (b *splicedBody) SupportsBodyWriteTo() bool { return true }

// WriteTo writes the whole body to w, each referenced string in one write.
func (b *splicedBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	at := 0
	for _, p := range b.parts {
		for _, chunk := range [][]byte{b.buf[at:p.at], p.ext} {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				return n, err
			}
		}
		at = p.at
	}
	k, err := w.Write(b.buf[at:])
	return n + int64(k), err
}

// Read serves a caller that does not use WriteTo.
func (b *splicedBody) Read(p []byte) (int, error) {
	if b.rd == nil {
		var rs []io.Reader
		at := 0
		for _, sp := range b.parts {
			rs = append(rs, bytes.NewReader(b.buf[at:sp.at]), bytes.NewReader(sp.ext))
			at = sp.at
		}
		b.rd = io.MultiReader(append(rs, bytes.NewReader(b.buf[at:]))...)
	}
	return b.rd.Read(p)
}

// Close runs done and recycles the body; fasthttp calls it once the
// response is written or abandoned.
func (b *splicedBody) Close() error {
	if b.done != nil {
		b.done()
	}
	b.buf, b.parts, b.n, b.done, b.rd = b.buf[:0], b.parts[:0], 0, nil, nil
	if cap(b.buf) <= 1<<20 {
		clear(b.parts[:cap(b.parts)])
		splicedBodies.Put(b)
	}
	return nil
}
