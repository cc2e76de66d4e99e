package envserver

import (
	"container/list"
	"strconv"
	"sync"
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
type frameCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front = most recent; values are *frameEntry
	byKey map[frameKey]*list.Element
}

type frameEntry struct {
	key  frameKey
	data []byte
}

func newFrameCache(maxBytes int64) *frameCache {
	return &frameCache{max: maxBytes, order: list.New(), byKey: map[frameKey]*list.Element{}}
}

// get returns the cached bytes for k and marks them recently used.
func (c *frameCache) get(k frameKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*frameEntry).data, true
}

// put stores data under k, evicting the least recently used entries past the
// byte bound. A single frame larger than the bound is not cached.
func (c *frameCache) put(k frameKey, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.byKey[k] = c.order.PushFront(&frameEntry{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*frameEntry)
		c.order.Remove(el)
		delete(c.byKey, e.key)
		c.size -= int64(len(e.data))
	}
}

// recent returns up to n hashes most recently used with this encoding, the
// candidates a guest may answer not_modified against.
func (c *frameCache) recent(format string, quality, n int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, n)
	for el := c.order.Front(); el != nil && len(out) < n; el = el.Next() {
		k := el.Value.(*frameEntry).key
		if k.format == format && k.quality == quality {
			out = append(out, k.hash)
		}
	}
	return out
}

// stats reports the entry count and bytes held.
func (c *frameCache) stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.size
}
