package client

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/vmihailenco/msgpack/v5"
)

// hostileGuest answers hello properly, then answers every call with body.
func hostileGuest(t *testing.T, body []byte) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			b, err := wire.ReadFrame(conn, nil)
			if err != nil {
				return
			}
			m, err := wire.Decode(b)
			if err != nil {
				return
			}
			reply := body
			if m.Method == wire.MethodHello {
				reply, _ = msgpack.Marshal(wire.Welcome{Protocol: wire.Protocol})
			}
			f, _ := wire.Encode(&wire.Message{ID: m.ID, Type: wire.TypeReply, Body: reply})
			if wire.WriteFrame(conn, f) != nil {
				return
			}
		}
	}()
	return sock
}

// TestHostileReplyRefused: a guest reply crafted to amplify (a window list
// of a million one-byte nils, each a struct once decoded) is refused before
// decoding, with an allocation about the reply's size; the guest is dropped
// (sandbox_died), since a sound guest never sends one.
func TestHostileReplyRefused(t *testing.T) {
	var body bytes.Buffer
	body.Write([]byte{0x81, 0xa7})
	body.WriteString("windows")
	body.WriteByte(0xdd)
	binary.Write(&body, binary.BigEndian, uint32(1<<20))
	body.Write(bytes.Repeat([]byte{0xc0}, 1<<20))
	sock := hostileGuest(t, body.Bytes())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = c.ListWindows(ctx)
	runtime.ReadMemStats(&after)
	if aci.CodeOf(err) != aci.CodeSandboxDied {
		t.Fatalf("hostile reply: got %v; want sandbox_died", err)
	}
	select {
	case <-c.Done():
	default:
		t.Errorf("the hostile guest's connection is still open")
	}
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(8*body.Len()); got > limit {
		t.Errorf("refusing a %d-byte reply allocated %d bytes; want at most %d", body.Len(), got, limit)
	}
}

// guestAnswering answers hello properly, then answers every call with the
// frame reply(id) builds (the whole message, not only its body).
func guestAnswering(t *testing.T, reply func(id uint64) []byte) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		for {
			b, err := wire.ReadFrame(conn, nil)
			if err != nil {
				return
			}
			m, err := wire.Decode(b)
			if err != nil {
				return
			}
			f := reply(m.ID)
			if m.Method == wire.MethodHello {
				w, _ := msgpack.Marshal(wire.Welcome{Protocol: wire.Protocol})
				f, _ = wire.Encode(&wire.Message{ID: m.ID, Type: wire.TypeReply, Body: w})
			}
			if wire.WriteFrame(conn, f) != nil {
				return
			}
		}
	}()
	return sock
}

// TestHostileErrorDetailRefused: an error reply whose detail is an array
// header announcing 2^32-1 elements (and carrying none) is refused before
// decoding, cheaply: the client allocates a small multiple of the frame,
// never anything sized by the header; the guest is dropped.
func TestHostileErrorDetailRefused(t *testing.T) {
	frame := func(id uint64) []byte {
		var b bytes.Buffer
		b.Write([]byte{0x83, 0xa2, 'i', 'd', 0xcf})
		binary.Write(&b, binary.BigEndian, id)
		b.Write([]byte{0xa1, 't', 0xa5})
		b.WriteString("reply")
		b.Write([]byte{0xa5})
		b.WriteString("error")
		b.Write([]byte{0x83, 0xa4})
		b.WriteString("code")
		b.Write([]byte{0xa8})
		b.WriteString("internal")
		b.Write([]byte{0xa7})
		b.WriteString("message")
		b.Write([]byte{0xa1, 'x', 0xa6})
		b.WriteString("detail")
		b.WriteByte(0xdd)
		binary.Write(&b, binary.BigEndian, uint32(1<<32-1))
		return b.Bytes()
	}
	sock := guestAnswering(t, frame)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, "unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	allocs := testing.AllocsPerRun(1, func() {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = c.Health(ctx)
		runtime.ReadMemStats(&after)
		got := after.TotalAlloc - before.TotalAlloc
		if got > 1<<20 {
			t.Errorf("refusing a %d-byte frame allocated %d bytes; want under 1 MiB", len(frame(1)), got)
		}
		t.Logf("refusing a %d-byte frame announcing 2^32-1 elements allocated %d bytes", len(frame(1)), got)
	})
	if aci.CodeOf(err) != aci.CodeSandboxDied {
		t.Fatalf("a detail array of 2^32-1 elements: got %v; want sandbox_died", err)
	}
	if allocs > 200 {
		t.Errorf("refusing the frame took %v allocations; want a handful", allocs)
	}
	t.Logf("%v allocations", allocs)
	select {
	case <-c.Done():
	default:
		t.Errorf("the hostile guest's connection is still open")
	}
}

// TestMalformedHashRefused: a capture whose hash is short, a path, or not
// hex is refused before anything keys a cache or names a file with it, and
// the guest is dropped; a well-formed one passes.
func TestMalformedHashRefused(t *testing.T) {
	for _, tc := range []struct {
		hash string
		ok   bool
	}{
		{"0123456789abcdef0123456789abcdef", true},
		{"a", false},
		{"", false},
		{"../../../../etc/passwd/0123456789ab", false},
		{"0123456789ABCDEF0123456789ABCDEF", false},
		{"0123456789abcdef0123456789abcdef00", false},
	} {
		body, _ := msgpack.Marshal(wire.Shot{Hash: tc.hash, W: 1, H: 1, Format: "png", Data: []byte{1}})
		sock := hostileGuest(t, body)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c, err := Dial(ctx, "unix", sock)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		_, err = c.Screenshot(ctx, wire.ObserveArgs{})
		if tc.ok && err != nil {
			t.Errorf("hash %q: %v; want accepted", tc.hash, err)
		}
		if !tc.ok && aci.CodeOf(err) != aci.CodeSandboxDied {
			t.Errorf("hash %q: got %v; want sandbox_died", tc.hash, err)
		}
		c.Close()
		cancel()
	}
}
