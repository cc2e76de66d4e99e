package mpcheck

import (
	"bytes"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestCheck(t *testing.T) {
	caps := Uniform{MaxItems: 4, ItemCost: 100, MaxString: 8}
	good, _ := msgpack.Marshal(map[string]any{"a": []int{1, 2, 3}, "s": "short"})
	w := Walk{Caps: caps, Factor: 1000}
	if err := w.Check(good); err != nil {
		t.Fatalf("good body: %v", err)
	}
	if w.Estimate() < 300 {
		t.Errorf("estimate %d; want at least 3 items of 100", w.Estimate())
	}
	cases := map[string][]byte{
		"too many items":   mustMarshal(t, []int{1, 2, 3, 4, 5}),
		"long string":      mustMarshal(t, map[string]string{"s": "much too long"}),
		"trailing":         append(append([]byte{}, good...), 0xc0),
		"truncated":        good[:len(good)-1],
		"lying length":     {0xdd, 0xff, 0xff, 0xff, 0xff},
		"too deep":         append(bytes.Repeat([]byte{0x91}, MaxDepth+2), 0xc0),
		"over the factor":  append([]byte{0x94}, bytes.Repeat([]byte{0xc0}, 4)...),
		"invalid tag 0xc1": {0xc1},
	}
	for name, b := range cases {
		w := Walk{Caps: caps, Factor: 10, Floor: 0}
		if name != "over the factor" {
			w.Factor = 1000
		}
		if err := w.Check(b); err == nil {
			t.Errorf("%s: got no error", name)
		}
	}
	over := Walk{Caps: caps, Factor: 10, Over: func(body, est int64) error { return errOver }}
	if err := over.Check(append([]byte{0x94}, bytes.Repeat([]byte{0xc0}, 4)...)); err != errOver || !strings.Contains(err.Error(), "over") {
		t.Errorf("Over: got %v; want the error it builds", err)
	}
}

type overErr struct{}

func (overErr) Error() string { return "over" }

var errOver error = overErr{}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzCheck: no body panics a walk; one that passes is exactly one value
// (Len reads all of it) and its estimate keeps within the bound the walk
// was given.
func FuzzCheck(f *testing.F) {
	for _, v := range []any{map[string]any{"a": []int{1, 2, 3}, "s": "short"}, []any{nil, true, 1.5, "x", []byte{1}}, "", int64(-1) << 40} {
		b, err := msgpack.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{0xdd, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		w := Walk{Caps: Uniform{MaxItems: 1 << 16, ItemCost: 16, MaxString: 1 << 16}, Factor: 64, Floor: 4096}
		if err := w.Check(b); err != nil {
			return
		}
		if est := w.Estimate(); est > 64*int64(len(b))+4096 || est < 0 {
			t.Fatalf("estimate %d for %d bytes passed the bound", est, len(b))
		}
		if n, err := Len(b); err != nil || n != len(b) {
			t.Fatalf("a checked body of %d bytes: Len %d, %v", len(b), n, err)
		}
	})
}
