package envserver

import (
	"strconv"

	"github.com/shinken-rl/shinken/internal/lru"
)

// frameKey names one encoding of one frame: the pixel hash plus how it was
// encoded. The hash alone already fixes the pixels and dimensions.
type frameKey struct {
	hash    string
	format  string
	quality int
}

func (k frameKey) String() string { return k.hash + "/" + k.format + "/" + strconv.Itoa(k.quality) }

// frameCache is the byte-bounded LRU shared by every env of a server: one
// encoded copy of each frame however many envs show it.
type frameCache struct{ *lru.Bytes[frameKey] }

func newFrameCache(maxBytes int64) *frameCache {
	return &frameCache{lru.New[frameKey](maxBytes)}
}

func (c *frameCache) get(k frameKey) ([]byte, bool) { return c.Get(k) }

// put stores data under k; a frame larger than the whole bound is not cached.
func (c *frameCache) put(k frameKey, data []byte) { c.Put(k, data) }

// recent returns up to n hashes most recently used with this encoding, the
// candidates a guest may answer not_modified against.
func (c *frameCache) recent(format string, quality, n int) []string {
	keys := c.Recent(n, func(k frameKey) bool { return k.format == format && k.quality == quality })
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k.hash
	}
	return out
}

// stats reports the entry count and bytes held.
func (c *frameCache) stats() (entries int, bytes int64) { return c.Stats() }
