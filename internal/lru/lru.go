// Package lru is a byte-bounded least-recently-used cache of byte slices,
// safe for concurrent use: the server's shared frame cache and the web UI's
// thumbnails are both one.
package lru

import (
	"container/list"
	"sync"
)

// Bytes holds values up to a total of max bytes, evicting the least
// recently used first. A value larger than the whole bound is not kept.
type Bytes[K comparable] struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // front = most recent; values are *entry[K]
	byKey map[K]*list.Element
}

type entry[K comparable] struct {
	key  K
	data []byte
}

// New returns an empty cache bounded to maxBytes.
func New[K comparable](maxBytes int64) *Bytes[K] {
	return &Bytes[K]{max: maxBytes, order: list.New(), byKey: make(map[K]*list.Element)}
}

// Get returns the bytes under k and marks them recently used.
func (c *Bytes[K]) Get(k K) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*entry[K]).data, true
}

// Put stores data under k (a key already held keeps its bytes and becomes
// the most recent), then evicts past the bound.
func (c *Bytes[K]) Put(k K, data []byte) {
	if int64(len(data)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.byKey[k] = c.order.PushFront(&entry[K]{key: k, data: data})
	c.size += int64(len(data))
	for c.size > c.max {
		el := c.order.Back()
		e := el.Value.(*entry[K])
		c.order.Remove(el)
		delete(c.byKey, e.key)
		c.size -= int64(len(e.data))
	}
}

// Recent returns up to n keys that keep accepts, most recently used first.
func (c *Bytes[K]) Recent(n int, keep func(K) bool) []K {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]K, 0, n)
	for el := c.order.Front(); el != nil && len(out) < n; el = el.Next() {
		if k := el.Value.(*entry[K]).key; keep(k) {
			out = append(out, k)
		}
	}
	return out
}

// Stats reports the entry count and the bytes held.
func (c *Bytes[K]) Stats() (entries int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey), c.size
}

// Peek returns the bytes under k without marking them used.
func (c *Bytes[K]) Peek(k K) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.byKey[k]; ok {
		return el.Value.(*entry[K]).data, true
	}
	return nil, false
}

// Find returns some entry whose key match accepts, without marking it used.
func (c *Bytes[K]) Find(match func(K) bool) (K, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, el := range c.byKey {
		if match(k) {
			return k, el.Value.(*entry[K]).data, true
		}
	}
	var zero K
	return zero, nil, false
}
