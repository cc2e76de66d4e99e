package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
	"github.com/vmihailenco/msgpack/v5"
	"golang.org/x/sys/unix"
)

// The protocol side of a Server: accepting connections, one goroutine per
// call, each call dispatched to the part of guestd that answers it, and the
// replies framed back (package wire).

const (
	maxCallTimeout = 10 * time.Minute
	defaultCallTTL = 30 * time.Second
	maxInFlight    = 256 // calls in flight per connection
)

// Serve accepts connections on ln until ctx ends or Close is called. It
// closes ln before returning.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return net.ErrClosed
	}
	s.lns[ln] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()
	for {
		conn, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("guest: accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			conn.Close()
			return nil
		}
		s.conns[conn] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.wg.Done()
			s.serveConn(ctx, conn)
			s.mu.Lock()
			delete(s.conns, conn)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops serving, ends every process the server started (exec'd commands
// and launched apps, by process group), drops the X connection and waits for
// the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.procs.killAll()
	s.web.close()
	s.wg.Wait()
	if s.idle != nil {
		s.idle.close()
	}
	s.x.close()
	s.hx.close()
	if s.x.quiet != nil {
		s.x.quiet.close()
	}
	if s.a11y != nil {
		s.a11y.Close()
	}
	return nil
}

// clientConn is one protocol connection.
type clientConn struct {
	s     *Server
	nc    net.Conn
	wmu   sync.Mutex
	hello bool
	slots chan struct{}
}

func (s *Server) serveConn(ctx context.Context, nc net.Conn) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer nc.Close()
	c := &clientConn{s: s, nc: nc, slots: make(chan struct{}, maxInFlight)}
	var calls sync.WaitGroup
	defer calls.Wait()
	var buf []byte
	for {
		b, err := wire.ReadFrame(nc, buf)
		if err != nil {
			return
		}
		buf = b
		m, err := wire.Decode(b)
		if err != nil || m.Type != wire.TypeCall {
			s.cfg.Logf("guest: bad frame from %s: %v", nc.RemoteAddr(), err)
			return
		}
		if m.Method == wire.MethodHello {
			// Hello is answered in order so later calls see the session open.
			w, err := c.s.hello(ctx, m.Body)
			if err != nil {
				c.replyErr(m.ID, err)
				continue
			}
			c.reply(m.ID, w)
			c.hello = true
			continue
		}
		if !c.hello {
			c.replyErr(m.ID, aci.Errorf(aci.CodeBadRequest, "%s before hello", m.Method))
			continue
		}
		select {
		case c.slots <- struct{}{}:
		default:
			c.replyErr(m.ID, aci.Errorf(aci.CodeBusy, "more than %d calls in flight on one connection", maxInFlight))
			continue
		}
		calls.Add(1)
		go func() {
			defer calls.Done()
			defer func() { <-c.slots }()
			c.handle(ctx, m)
		}()
	}
}

// handle runs one call under its deadline; a panic becomes an internal error.
func (c *clientConn) handle(ctx context.Context, m *wire.Message) {
	ttl := defaultCallTTL
	if m.TimeoutMS > 0 {
		ttl = min(time.Duration(m.TimeoutMS)*time.Millisecond, maxCallTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	defer func() {
		if r := recover(); r != nil {
			c.s.cfg.Logf("guest: panic in %s: %v\n%s", m.Method, r, debug.Stack())
			c.replyErr(m.ID, aci.Errorf(aci.CodeInternal, "%s: panic: %v", m.Method, r))
		}
	}()
	res, err := c.s.dispatch(ctx, m, func(chunk any) error { return c.send(m.ID, wire.TypeChunk, chunk, nil) })
	if err != nil {
		if ctx.Err() != nil && aci.CodeOf(err) == aci.CodeInternal {
			err = aci.Errorf(aci.CodeTimeout, "%s: deadline of %v passed: %v", m.Method, ttl, err)
		}
		c.replyErr(m.ID, err)
		return
	}
	c.send(m.ID, wire.TypeReply, res, nil)
	// A raw or raws2 frame's bytes are a kept buffer: written, they are reused.
	if sh := shotOf(res); sh != nil && sh.Data != nil {
		c.s.x.pipe.release(sh)
		sh.Data = nil
	}
}

func (c *clientConn) reply(id uint64, res any) { c.send(id, wire.TypeReply, res, nil) }

func (c *clientConn) replyErr(id uint64, err error) {
	c.send(id, wire.TypeReply, nil, aci.AsError(err))
}

func (c *clientConn) send(id uint64, typ string, body any, e *aci.Error) error {
	// A frame's reply is megabytes: encode it once, straight into a buffer
	// sized up front and reused, rather than encoding the body and then
	// copying it into the envelope (docs/architecture.md, "Cost of a step").
	hint := 512
	if sh := shotOf(body); sh != nil {
		hint += len(sh.Data)
	}
	buf := getSendBuf(hint)
	defer putSendBuf(buf)
	if err := encodeMessage(buf, id, typ, body, e); err != nil {
		buf.Reset()
		if err := encodeMessage(buf, id, typ, nil, aci.Errorf(aci.CodeInternal, "encode reply: %v", err)); err != nil {
			return err
		}
	}
	frame := buf.Bytes()
	if len(frame) > wire.MaxFrame {
		var err error
		frame, err = wire.Encode(&wire.Message{ID: id, Type: typ, Error: aci.Errorf(aci.CodeTooLarge, "reply of %d bytes exceeds the frame limit", len(frame))})
		if err != nil {
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
	if err := wire.WriteFrame(c.nc, frame); err != nil {
		c.nc.Close() // a stuck or broken peer: drop the connection
		return err
	}
	return nil
}

// encodeMessage writes wire.Message{ID: id, Type: typ, Body: <body
// encoded>, Error: e} as msgpack: the map wire.Decode reads, with the body
// encoded in place (the bytes a RawMessage of it would embed).
func encodeMessage(buf *bytes.Buffer, id uint64, typ string, body any, e *aci.Error) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	n := 2
	if body != nil {
		n++
	}
	if e != nil {
		n++
	}
	field := func(key string, v any) error {
		if err := enc.EncodeString(key); err != nil {
			return err
		}
		return enc.Encode(v)
	}
	err := enc.EncodeMapLen(n)
	if err == nil {
		err = field("id", id)
	}
	if err == nil {
		err = field("t", typ)
	}
	if err == nil && body != nil {
		err = field("body", body)
	}
	if err == nil && e != nil {
		err = field("error", e)
	}
	return err
}

// shotOf is the frame a reply carries, if any.
func shotOf(res any) *wire.Shot {
	switch r := res.(type) {
	case *wire.Shot:
		return r
	case *wire.ActResult:
		return r.Obs
	}
	return nil
}

// sendBufs holds reply buffers between replies; sendBufMax bounds what one
// keeps (a larger one is let go).
var sendBufs sync.Pool

const sendBufMax = 16 << 20

func getSendBuf(n int) *bytes.Buffer {
	b, _ := sendBufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	b.Reset()
	b.Grow(n)
	return b
}

func putSendBuf(b *bytes.Buffer) {
	if b.Cap() <= sendBufMax {
		sendBufs.Put(b)
	}
}

func encodeInto(buf *bytes.Buffer, v any) error {
	enc := msgpack.GetEncoder()
	defer msgpack.PutEncoder(enc)
	enc.Reset(buf)
	return enc.Encode(v)
}

func (s *Server) dispatch(ctx context.Context, m *wire.Message, chunk func(any) error) (any, error) {
	switch m.Method {
	case wire.MethodAct:
		var a wire.ActArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.act(ctx, a)
	case wire.MethodScreenshot:
		var a wire.ObserveArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.observe(ctx, a, nil)
	case wire.MethodListWindows:
		return s.x.listWindows(ctx)
	case wire.MethodExec:
		var a wire.ExecArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.exec(ctx, a, chunk)
	case wire.MethodPutFile:
		var a wire.PutFileArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		switch {
		case (a.Kind != "" || a.Offset != 0) && !a.Agent:
			return nil, aci.Errorf(aci.CodeBadRequest, "put_file: kind and offset are the agent's files' only")
		case a.Kind == wire.FileKindTar:
			return struct{}{}, s.putAgentTree(a)
		case a.Kind != "":
			return nil, aci.Errorf(aci.CodeBadRequest, "put_file: kind %q (want %q or none)", a.Kind, wire.FileKindTar)
		case a.Offset != 0:
			return struct{}{}, s.putAgentChunk(a)
		case a.Agent:
			return struct{}{}, s.putAgentFile(a)
		}
		return struct{}{}, putFile(a)
	case wire.MethodGetFile:
		var a wire.GetFileArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		switch {
		case a.Kind == wire.FileKindTar:
			return s.getAgentTree(a)
		case a.Kind != "":
			return nil, aci.Errorf(aci.CodeBadRequest, "get_file: kind %q (want %q or none)", a.Kind, wire.FileKindTar)
		case a.Length != 0 || a.Offset != 0:
			return s.getAgentRange(a)
		}
		return s.getAgentFile(a)
	case wire.MethodScore:
		var a wire.ScoreArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.runScore(ctx, a)
	case wire.MethodReset:
		var a wire.ResetArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.reset(ctx, a)
	case wire.MethodWeb:
		var a wire.WebArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.web.serve(a, s.cfg.Logf)
	case wire.MethodBrowser:
		var a wire.BrowserArgs
		if err := decodeArgs(m, &a); err != nil {
			return nil, err
		}
		return s.browser.op(ctx, a)
	case wire.MethodHealth:
		return s.health(ctx), nil
	default:
		return nil, aci.Errorf(aci.CodeUnsupported, "unknown method %q", m.Method)
	}
}

func decodeArgs(m *wire.Message, v any) error {
	if len(m.Body) == 0 {
		return nil
	}
	if err := msgpack.Unmarshal(m.Body, v); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "%s: decode args: %v", m.Method, err)
	}
	return nil
}

// methods lists the protocol methods this server answers.
var methods = []string{wire.MethodHello, wire.MethodAct, wire.MethodScreenshot, wire.MethodListWindows, wire.MethodExec, wire.MethodPutFile, wire.MethodGetFile, wire.MethodHealth, wire.MethodScore, wire.MethodReset, wire.MethodWeb, wire.MethodBrowser}

func (s *Server) hello(ctx context.Context, body []byte) (*wire.Welcome, error) {
	var h wire.HelloArgs
	if len(body) > 0 {
		if err := msgpack.Unmarshal(body, &h); err != nil {
			return nil, aci.Errorf(aci.CodeBadRequest, "hello: %v", err)
		}
	}
	if h.Protocol != 0 && h.Protocol != wire.Protocol {
		return nil, aci.Errorf(aci.CodeUnsupported, "hello: protocol %d; this guest speaks %d", h.Protocol, wire.Protocol)
	}
	w := wire.Welcome{
		Protocol:        wire.Protocol,
		Version:         Version,
		Verbs:           s.verbNames(),
		Methods:         methods,
		Formats:         append(slices.Clone(aci.Formats), wire.FormatRawS2),
		FrameDedup:      true,
		ObserveAfterAct: true,
		A11y:            s.a11y != nil,
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if info, err := s.x.info(ctx); err == nil {
		w.Screen = wire.Size{W: info.w, H: info.h}
		w.SHM = info.shm
		w.Damage = info.damage
	}
	return &w, nil
}

// health probes X on a connection of its own, so it never queues behind a
// long action (a drag, a settle) on the main one; an X server that takes more
// than 3/4 of the caller's deadline (at most 3 s) to answer counts as dead.
func (s *Server) health(ctx context.Context) *wire.Health {
	within := xTimeout
	if dl, ok := ctx.Deadline(); ok {
		within = min(within, time.Until(dl)*3/4)
	}
	h := &wire.Health{}
	wm, err := s.hx.wmAlive(ctx, within)
	if aci.CodeOf(err) == aci.CodeTimeout {
		// Waiting on other health calls: the X server itself did not fail.
		h.X, h.WM = true, true
		return h
	}
	if aci.CodeOf(err) == aci.CodeDisplayError && s.xRunning() {
		// The X server runs but did not answer in time: held by a client
		// (a grab), which the next operation of the episode diagnoses
		// (xstall.go), or wedged, which that operation then reports. A
		// health probe does not decide it.
		h.X, h.WM = true, true
		return h
	}
	if err != nil {
		h.Error = err.Error()
		return h
	}
	// Between a reset's quiesce and its relaunch the window manager is
	// down on purpose: the relaunch starts it afresh.
	h.X, h.WM = true, wm || s.helpersDown.Load()
	return h
}

// xRunning reports whether the X server process guestd started still runs
// (false where guestd did not start it).
func (s *Server) xRunning() bool {
	if s.cfg.Exempt == nil {
		return false
	}
	ex := s.cfg.Exempt()
	return len(ex) > 0 && ex[0] > 0 && unix.Kill(ex[0], 0) == nil && !zombieProc(ex[0])
}

// zombieProc reports whether pid has exited but is not reaped yet.
func zombieProc(pid int) bool {
	st, err := procstat.Read(pid)
	return err == nil && st.State == 'Z'
}

// Listen opens a listener from a guestd address: "unix:/path" or "tcp:host:port".
// A stale unix socket file at path is removed first.
func Listen(addr string) (net.Listener, error) {
	network, a, err := SplitAddr(addr)
	if err != nil {
		return nil, err
	}
	if network == "unix" {
		if fi, err := os.Lstat(a); err == nil && fi.Mode()&os.ModeSocket != 0 {
			os.Remove(a)
		}
	}
	return net.Listen(network, a)
}

// SplitAddr splits "unix:/path" or "tcp:host:port" into a network and address.
func SplitAddr(addr string) (network, address string, err error) {
	for _, n := range []string{"unix", "tcp"} {
		if len(addr) > len(n)+1 && addr[:len(n)+1] == n+":" {
			return n, addr[len(n)+1:], nil
		}
	}
	return "", "", fmt.Errorf("guest: address %q: want unix:/path or tcp:host:port", addr)
}
