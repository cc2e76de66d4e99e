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
