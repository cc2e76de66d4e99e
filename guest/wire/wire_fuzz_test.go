package wire_test

import (
	"bytes"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// realFrames are frames as the client and guestd put them on the wire.
func realFrames(tb testing.TB) [][]byte {
	body := func(v any) msgpack.RawMessage {
		b, err := msgpack.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	x, y := 10.0, 20.0
	msgs := []wire.Message{
		{ID: 1, Type: wire.TypeCall, Method: wire.MethodHello, TimeoutMS: 30000, Body: body(wire.HelloArgs{Protocol: 1, Client: "shinken-go"})},
		{ID: 1, Type: wire.TypeReply, Body: body(wire.Welcome{Protocol: 1, Version: "0.1.0", Verbs: []string{"click"}, Formats: []string{"png"}, Screen: wire.Size{W: 1280, H: 800}})},
		{ID: 2, Type: wire.TypeCall, Method: wire.MethodAct, TimeoutMS: 5000, Body: body(wire.ActArgs{
			Action:  aci.Action{Verb: aci.Click, X: &x, Y: &y, Modifiers: []string{"ctrl"}},
			Observe: &wire.ObserveArgs{Observe: aci.Observe{Format: "png", MaxLongEdge: 640}, IfNoneMatch: []string{"0123456789abcdef0123456789abcdef"}}})},
		{ID: 2, Type: wire.TypeReply, Body: body(wire.ActResult{Pointer: [2]int{10, 20}, Obs: &wire.Shot{Hash: "0123456789abcdef0123456789abcdef", W: 640, H: 400, Format: "png", NotModified: true,
			Settle: &aci.SettleInfo{WaitedMS: 310, Damaged: true}}})},
		{ID: 5, Type: wire.TypeCall, Method: wire.MethodScreenshot, Body: body(wire.ObserveArgs{Observe: aci.Observe{Format: "raw", Scope: "active_window",
			Settle: &aci.Settle{FirstMS: 200, QuietMS: 300, MaxMS: 2000}}, AfterInput: true})},
		{ID: 6, Type: wire.TypeReply, Body: body(wire.ActResult{PID: 42, WindowID: 4194305, Windows: []wire.Window{{ID: 4194305, Title: "Terminal", Class: "XTerm", Focused: true, Geometry: aci.Rect{W: 640, H: 400}}}})},
		{ID: 3, Type: wire.TypeCall, Method: wire.MethodExec, Body: body(wire.ExecArgs{Shell: "echo hi", Stream: true})},
		{ID: 3, Type: wire.TypeChunk, Body: body(wire.ExecChunk{Seq: 0, Stream: "stdout", Data: []byte("hi\n")})},
		{ID: 4, Type: wire.TypeReply, Error: aci.Errorf(aci.CodeDisplayError, "x server :1 did not answer")},
	}
	var out [][]byte
	for i := range msgs {
		b, err := wire.Encode(&msgs[i])
		if err != nil {
			tb.Fatal(err)
		}
		var buf bytes.Buffer
		wire.WriteFrame(&buf, b)
		out = append(out, buf.Bytes())
	}
	return out
}

// FuzzDecode feeds arbitrary bytes to the frame reader and decoder: they
// must fail cleanly, never panic or over-allocate, and whatever decodes must
// survive a re-encode.
func FuzzDecode(f *testing.F) {
	for _, fr := range realFrames(f) {
		f.Add(fr)
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var buf []byte
		for {
			b, err := wire.ReadFrame(r, buf)
			if err != nil {
				return
			}
			buf = b
			m, err := wire.Decode(b)
			if err != nil {
				continue
			}
			again, err := wire.Encode(m)
			if err != nil {
				t.Fatalf("re-encode of a decoded message: %v", err)
			}
			m2, err := wire.Decode(again)
			if err != nil || m2.ID != m.ID || m2.Type != m.Type || m2.Method != m.Method || !bytes.Equal(m2.Body, m.Body) {
				t.Fatalf("round trip changed the message: %+v → %+v (%v)", m, m2, err)
			}
		}
	})
}

func TestRealFramesDecode(t *testing.T) {
	for i, fr := range realFrames(t) {
		b, err := wire.ReadFrame(bytes.NewReader(fr), nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := wire.Decode(b); err != nil {
			t.Errorf("frame %d: %v", i, err)
		}
	}
	if _, err := wire.ReadFrame(bytes.NewReader([]byte{0x7f, 0, 0, 0}), nil); err != wire.ErrFrameTooLarge {
		t.Errorf("oversize frame: got %v; want ErrFrameTooLarge", err)
	}
}
