// Package client is the host side of the host⇄guest protocol: a connection to
// one guestd that many goroutines may call at once.
package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/mpcheck"
	"github.com/vmihailenco/msgpack/v5"
)

// DefaultCallTimeout is the deadline sent with a call whose ctx has none.
const DefaultCallTimeout = 30 * time.Second

// Client is a connection to one guestd. It is safe for concurrent use; several
// calls may be in flight at once.
type Client struct {
	conn    net.Conn
	welcome wire.Welcome

	wmu sync.Mutex // serializes frame writes

	mu      sync.Mutex
	pending map[uint64]*call
	nextID  atomic.Uint64
	err     error // why the connection ended; set before done closes

	done      chan struct{}
	closeOnce sync.Once
}

type call struct {
	reply   chan *wire.Message // capacity 1
	onChunk func(wire.Message)
}

// Dial connects to guestd at addr (network "unix" or "tcp") and performs the
// hello handshake. ctx bounds both.
func Dial(ctx context.Context, network, addr string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, &aci.Error{Code: aci.CodeSandboxDied, Message: fmt.Sprintf("dial guest %s %s: %v", network, addr, err)}
	}
	c := &Client{conn: conn, pending: make(map[uint64]*call), done: make(chan struct{})}
	go c.readLoop()
	if err := c.call(ctx, wire.MethodHello, wire.HelloArgs{Protocol: wire.Protocol, Client: "shinken-go"}, &c.welcome, nil); err != nil {
		c.Close()
		return nil, err
	}
	if c.welcome.Protocol != wire.Protocol {
		c.Close()
		return nil, aci.Errorf(aci.CodeUnsupported, "guest speaks protocol %d; want %d", c.welcome.Protocol, wire.Protocol)
	}
	return c, nil
}

// Welcome returns the guest's answer to hello.
func (c *Client) Welcome() wire.Welcome { return c.welcome }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

// Close ends the connection; calls in flight fail with sandbox_died.
func (c *Client) Close() error {
	c.shutdown(errors.New("client closed"))
	return nil
}

// Act runs one action, and captures afterwards when args.Observe is set.
func (c *Client) Act(ctx context.Context, args wire.ActArgs) (*wire.ActResult, error) {
	var r wire.ActResult
	if err := c.call(ctx, wire.MethodAct, args, &r, nil); err != nil {
		return nil, err
	}
	if err := c.checkShot(wire.MethodAct, r.Obs); err != nil {
		return nil, err
	}
	return &r, nil
}

// Screenshot captures the screen (or a window).
func (c *Client) Screenshot(ctx context.Context, args wire.ObserveArgs) (*wire.Shot, error) {
	var r wire.Shot
	if err := c.call(ctx, wire.MethodScreenshot, args, &r, nil); err != nil {
		return nil, err
	}
	if err := c.checkShot(wire.MethodScreenshot, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// checkShot refuses a capture whose hashes are not of the guest's shape: a
// hash keys the server's shared frame cache and names stored frames, so a
// guest that sends a malformed one is broken (or hostile) and is dropped
// like one that sends a malformed frame.
func (c *Client) checkShot(method string, s *wire.Shot) error {
	if err := wire.CheckShot(s); err != nil {
		c.shutdown(fmt.Errorf("guest sent a malformed capture: %w", err))
		return died(method, err)
	}
	return nil
}

// ListWindows lists the top-level windows.
func (c *Client) ListWindows(ctx context.Context) (*wire.Windows, error) {
	var r wire.Windows
	if err := c.call(ctx, wire.MethodListWindows, struct{}{}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// GetFile reads one of the agent's files with the agent's rights
// (wire.GetFileArgs).
func (c *Client) GetFile(ctx context.Context, args wire.GetFileArgs) (*wire.GetFileResult, error) {
	var r wire.GetFileResult
	if err := c.call(ctx, wire.MethodGetFile, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Exec runs a command inside the sandbox and returns its collected output.
func (c *Client) Exec(ctx context.Context, args wire.ExecArgs) (*wire.ExecResult, error) {
	args.Stream = false
	var r wire.ExecResult
	if err := c.call(ctx, wire.MethodExec, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Score freezes the agent's processes and runs a verifier as the scoring
// identity (see wire.ScoreArgs).
func (c *Client) Score(ctx context.Context, args wire.ScoreArgs) (*wire.ScoreResult, error) {
	var r wire.ScoreResult
	if err := c.call(ctx, wire.MethodScore, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Reset runs one phase of an in-place reset (see wire.ResetArgs).
func (c *Client) Reset(ctx context.Context, args wire.ResetArgs) (*wire.ResetResult, error) {
	var r wire.ResetResult
	if err := c.call(ctx, wire.MethodReset, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// ExecStream runs a command and hands its output to onChunk, in order, as it
// arrives; the result carries the exit status only. onChunk runs on the
// connection's reader and must return quickly.
func (c *Client) ExecStream(ctx context.Context, args wire.ExecArgs, onChunk func(wire.ExecChunk)) (*wire.ExecResult, error) {
	args.Stream = true
	var r wire.ExecResult
	err := c.call(ctx, wire.MethodExec, args, &r, func(m wire.Message) {
		var ch wire.ExecChunk
		if msgpack.Unmarshal(m.Body, &ch) == nil && onChunk != nil {
			onChunk(ch)
		}
	})
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// PutFile writes a file inside the sandbox.
func (c *Client) PutFile(ctx context.Context, args wire.PutFileArgs) error {
	return c.call(ctx, wire.MethodPutFile, args, nil, nil)
}

// Web serves one of the sandbox's offline web apps.
func (c *Client) Web(ctx context.Context, args wire.WebArgs) (*wire.WebResult, error) {
	var r wire.WebResult
	if err := c.call(ctx, wire.MethodWeb, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Browser drives the sandbox's Chromium (open pages, close it).
func (c *Client) Browser(ctx context.Context, args wire.BrowserArgs) (*wire.BrowserResult, error) {
	var r wire.BrowserResult
	if err := c.call(ctx, wire.MethodBrowser, args, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

// Health reports whether the sandbox's X server and window manager are alive.
func (c *Client) Health(ctx context.Context) (*wire.Health, error) {
	var r wire.Health
	if err := c.call(ctx, wire.MethodHealth, struct{}{}, &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

func (c *Client) call(ctx context.Context, method string, args, out any, onChunk func(wire.Message)) error {
	timeout := DefaultCallTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
		if timeout <= 0 {
			return aci.Errorf(aci.CodeTimeout, "%s: deadline already passed", method)
		}
	}
	body, err := msgpack.Marshal(args)
	if err != nil {
		return aci.Errorf(aci.CodeBadRequest, "%s: encode args: %v", method, err)
	}
	id := c.nextID.Add(1)
	msg := wire.Message{ID: id, Type: wire.TypeCall, Method: method, TimeoutMS: max(timeout.Milliseconds(), 1), Body: body}
	frame, err := wire.Encode(&msg)
	if err != nil {
		return aci.Errorf(aci.CodeBadRequest, "%s: encode: %v", method, err)
	}
	pc := &call{reply: make(chan *wire.Message, 1), onChunk: onChunk}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return died(method, err)
	}
	c.pending[id] = pc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	if err := c.write(ctx, frame); err != nil {
		c.shutdown(err)
		return died(method, err)
	}
	select {
	case m := <-pc.reply:
		return decodeReply(method, m, out)
	case <-ctx.Done():
		return aci.Errorf(aci.CodeTimeout, "%s: %v", method, ctx.Err())
	case <-c.done:
		// A reply may have raced the close.
		select {
		case m := <-pc.reply:
			return decodeReply(method, m, out)
		default:
		}
		c.mu.Lock()
		err := c.err
		c.mu.Unlock()
		return died(method, err)
	}
}

func died(method string, err error) error {
	return &aci.Error{Code: aci.CodeSandboxDied, Message: fmt.Sprintf("%s: guest connection lost: %v", method, err)}
}

func (c *Client) write(ctx context.Context, frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(DefaultCallTimeout)
	}
	c.conn.SetWriteDeadline(dl)
	return wire.WriteFrame(c.conn, frame)
}

func (c *Client) readLoop() {
	var buf []byte
	for {
		b, err := wire.ReadFrame(c.conn, buf)
		if err != nil {
			c.shutdown(err)
			return
		}
		buf = b
		if err := CheckFrame(b); err != nil {
			c.shutdown(fmt.Errorf("guest sent a frame refused before decoding: %w", err))
			return
		}
		m, err := wire.Decode(b)
		if err != nil {
			c.shutdown(err)
			return
		}
		// Decode copies Body out of buf, so buf is reused for the next frame.
		c.mu.Lock()
		pc := c.pending[m.ID]
		c.mu.Unlock()
		if pc == nil {
			continue // the caller gave up
		}
		switch m.Type {
		case wire.TypeChunk:
			if pc.onChunk != nil {
				pc.onChunk(*m)
			}
		case wire.TypeReply:
			select {
			case pc.reply <- m:
			default:
			}
		}
	}
}

func (c *Client) shutdown(err error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
		c.conn.Close()
		close(c.done)
	})
}

// decodeReply returns a reply's typed error, or decodes its body into out.
// decodeReply decodes m's body into out (the values own their bytes) and
// hands the body back for reuse.
func decodeReply(method string, m *wire.Message, out any) error {
	defer m.Release()
	if m.Error != nil {
		return m.Error
	}
	if out != nil && len(m.Body) > 0 {
		if err := msgpack.Unmarshal(m.Body, out); err != nil {
			return aci.Errorf(aci.CodeInternal, "%s: decode reply: %v", method, err)
		}
	}
	return nil
}

// CheckFrame walks one frame a guest sent (see guestWalk) before it is
// decoded; every host reader of guest frames calls it first.
func CheckFrame(b []byte) error { return guestWalk().Check(b) }

// guestWalk checks each frame a guest sends (its body included: the body
// is inline msgpack) before anything is decoded: the host does not trust
// the sandbox, so a frame may not make the host allocate more than a small
// factor of its size (an array of a million one-byte nils that would each
// become a struct) nor carry unbounded item counts. A guest that sends one
// is broken: its connection is dropped and the sandbox counts as dead.
func guestWalk() *mpcheck.Walk {
	return &mpcheck.Walk{
		Caps:   mpcheck.Uniform{MaxItems: 1 << 16, ItemCost: 256, MaxString: wire.MaxFrame},
		Factor: 32, Floor: 1 << 20,
	}
}
