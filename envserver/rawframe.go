package envserver

import (
	"sync/atomic"

	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/rgbs2"
)

// keptRaw is the last raw frame an env delivered, decoded, beside the raws2
// block it was decoded from. A guest sends each raws2 frame as bands that
// each decode on their own (internal/rgbs2), so the env's next frame decodes
// only the bands whose bytes changed into this one instead of three
// megabytes afresh (docs/architecture.md, "Cost of a step").
type keptRaw struct {
	w, h    int
	blk     []byte // the raws2 block rgb was decoded from (shared with the frame cache, never written)
	offs    []int  // its bands' offsets (rgbs2.Split)
	rgb     []byte
	scratch []byte
	lent    atomic.Bool // a reply being written delivers rgb: it must not change
}

// maxKeptRawBytes bounds the decoded frames all envs keep together; an env
// that finds no room decodes each raw frame whole, as without bands.
const maxKeptRawBytes = 1 << 30

// keptRawBytes is what all envs' keptRaw frames hold.
var keptRawBytes atomic.Int64

// dropRaw forgets e's kept frame (e.mu held). A reply still delivering it
// keeps its bytes until it is written.
func (e *env) dropRaw() {
	if e.raw != nil {
		keptRawBytes.Add(-int64(len(e.raw.rgb)))
		e.raw = nil
	}
}

// patchRaw returns shot's pixels decoded into e's kept frame, decoding only
// the bands that differ from the kept frame's, and lends them to b's reply;
// nil when shot has no bands, the kept frame is lent to a reply still being
// written, no room is left under maxKeptRawBytes, or a band does not decode
// on its own (the caller then decodes the frame whole). e.mu is held.
func (b *batch) patchRaw(e *env, shot *wire.Shot) []byte {
	if shot.Bands == nil {
		return nil
	}
	offs, err := rgbs2.Split(shot.Data, shot.Bands, nil)
	if err != nil {
		return nil
	}
	kr := e.raw
	if kr != nil && (kr.lent.Load() || kr.w != shot.W || kr.h != shot.H) {
		e.dropRaw()
		kr = nil
	}
	var old []byte
	if kr == nil {
		n := shot.W * shot.H * 3
		if keptRawBytes.Add(int64(n)) > maxKeptRawBytes {
			keptRawBytes.Add(-int64(n))
			return nil
		}
		kr = &keptRaw{w: shot.W, h: shot.H, rgb: make([]byte, n)}
		e.raw = kr
	} else {
		old = kr.blk
	}
	if kr.scratch, err = rgbs2.Patch(kr.rgb, kr.w, kr.h, old, kr.offs, shot.Data, offs, kr.scratch); err != nil {
		e.dropRaw() // partly patched
		return nil
	}
	kr.blk, kr.offs = shot.Data, offs
	kr.lent.Store(true)
	b.mu.Lock()
	b.kept = append(b.kept, kr)
	b.mu.Unlock()
	return kr.rgb
}
