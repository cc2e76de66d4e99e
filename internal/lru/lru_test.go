package lru

import (
	"fmt"
	"testing"
)

func TestBytesBound(t *testing.T) {
	c := New[string](10)
	c.Put("a", make([]byte, 4))
	c.Put("b", make([]byte, 4))
	c.Get("a") // a is now the most recent: b goes first
	c.Put("c", make([]byte, 4))
	if _, ok := c.Get("b"); ok {
		t.Error("b survived; want it evicted as least recently used")
	}
	for _, k := range []string{"a", "c"} {
		if _, ok := c.Get(k); !ok {
			t.Errorf("%s evicted; want it kept", k)
		}
	}
	if n, b := c.Stats(); n != 2 || b != 8 {
		t.Errorf("stats %d entries %d bytes; want 2, 8", n, b)
	}
	c.Put("huge", make([]byte, 11))
	if _, ok := c.Get("huge"); ok {
		t.Error("a value over the whole bound was kept")
	}
	got := fmt.Sprint(c.Recent(5, func(k string) bool { return k != "a" }))
	if got != "[c]" {
		t.Errorf("recent %s; want [c]", got)
	}
}
