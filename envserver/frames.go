package envserver

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/s2"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/internal/lru"
)

// frames.go holds frames as the server keeps them: the frame cache every env
// shares, where raw frames are kept S2-compressed, and the raw frame an env
// keeps decoded for its next step's bands. Reading a stored frame back
// (decodeStored) is the observation's, in observation.go.

// frameKey names one encoding of one frame: the pixel hash plus how it was
// encoded. The hash alone already fixes the pixels and dimensions.
type frameKey struct {
	hash    string
	format  string
	quality int
}

func (k frameKey) String() string { return k.hash + "/" + k.format + "/" + strconv.Itoa(k.quality) }

// frameCache is the byte-bounded LRU shared by every env of a server: one
// encoded copy of each frame however many envs show it. Raw (RGB24) frames
// are kept S2-compressed, the form the recorder stores them in, and
// decoded when read (docs/architecture.md, "Cost of a step"): a screen
// compresses some twentyfold, so the budget holds that many more of them,
// and the server's heap does not grow by a fresh 3 MB frame per step that
// the cache keeps alive.
type frameCache struct{ lru *lru.Bytes[frameKey] }

func newFrameCache(maxBytes int64) *frameCache {
	return &frameCache{lru.New[frameKey](maxBytes)}
}

// getStored returns k's bytes as the cache holds them (a raw frame
// S2-compressed; decodeStored turns them back).
func (c *frameCache) getStored(k frameKey) ([]byte, bool) { return c.lru.Get(k) }

// put stores data under k and returns the bytes a recorder keeps: data
// itself, or for a raw frame its S2 form (format wire.FormatRawS2). A frame
// larger than the whole bound is not cached.
func (c *frameCache) put(k frameKey, data []byte) (stored []byte) {
	stored = data
	if k.format == aci.FormatRaw {
		if stored = compressRaw(data); stored == nil {
			return nil
		}
	}
	c.lru.Put(k, stored)
	return stored
}

// putStored stores a frame already in the cache's form (a raw frame as
// S2, straight from a guest that sends it so).
func (c *frameCache) putStored(k frameKey, stored []byte) { c.lru.Put(k, stored) }

// recent returns up to n hashes most recently used with this encoding, the
// candidates a guest may answer not_modified against.
func (c *frameCache) recent(format string, quality, n int) []string {
	keys := c.lru.Recent(n, func(k frameKey) bool { return k.format == format && k.quality == quality })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.hash
	}
	return out
}

// stats reports the entry count and bytes held.
func (c *frameCache) stats() (entries int, bytes int64) { return c.lru.Stats() }

// s2Scratch holds S2's worst-case output buffers (megabytes, which S2
// wants up front); only the compressed bytes are kept.
var s2Scratch sync.Pool // *[]byte

// compressRaw returns the S2 form of a raw frame, in a buffer of its own.
func compressRaw(data []byte) []byte {
	n := s2.MaxEncodedLen(len(data))
	if n < 0 {
		return nil // beyond S2's block size: not a frame X serves here
	}
	p, _ := s2Scratch.Get().(*[]byte)
	if p == nil || cap(*p) < n {
		b := make([]byte, n)
		p = &b
	}
	out := bytes.Clone(s2.Encode((*p)[:n], data))
	s2Scratch.Put(p)
	return out
}

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
