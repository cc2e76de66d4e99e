package guest_test

import (
	"bufio"
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jezek/xgb"
	"github.com/jezek/xgb/xproto"
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// xvfbSegment is the framebuffer segment Xvfb pid created: its mode and
// how many processes have it attached.
func xvfbSegment(t *testing.T, pid int) (perms, nattch int, ok bool) {
	t.Helper()
	f, err := os.Open("/proc/sysvipc/shm")
	if err != nil {
		t.Skipf("no /proc/sysvipc/shm: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 7 || fl[4] != strconv.Itoa(pid) {
			continue
		}
		p, _ := strconv.ParseUint(fl[2], 8, 32)
		n, _ := strconv.Atoi(fl[6])
		return int(p) & 0o777, n, true
	}
	return 0, 0, false
}

// TestFramebufferCapture: captures read Xvfb's framebuffer where it lies
// (docs/architecture.md, "Cost of a step"). What they deliver must be what
// GetImage reads, pointer excluded, before and after the screen changes;
// and the segment must be private to guestd's user, so that no agent
// process can draw into it behind the damage guestd tracks.
func TestFramebufferCapture(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	perms, _, ok := xvfbSegment(t, d.sess.XPid())
	if !ok {
		t.Fatal("Xvfb keeps no framebuffer segment (started without -shmem?)")
	}
	if perms&0o077 != 0 {
		t.Fatalf("framebuffer segment mode %o: others may read or write it", perms)
	}
	c, err := xgb.NewConnDisplay(d.sess.Display())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := xproto.Setup(c).DefaultScreen(c).Root
	getImage := func() []byte {
		t.Helper()
		img, err := xproto.GetImage(c, xproto.ImageFormatZPixmap, xproto.Drawable(root), 0, 0, testW, testH, 0xffffffff).Reply()
		if err != nil {
			t.Fatal(err)
		}
		rgb := make([]byte, 0, testW*testH*3)
		for i := 0; i+4 <= testW*testH*4; i += 4 {
			rgb = append(rgb, img.Data[i+2], img.Data[i+1], img.Data[i])
		}
		return rgb
	}
	ctx := ctxT(t)
	raw := wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw}}
	r.Fill(0, 0, testW, testH, 0x203040)
	r.Fill(40, 40, 200, 120, 0xffffff)
	// The pointer over the white box: a software cursor drawn into the
	// framebuffer would show there.
	act(t, d, aci.Action{Verb: aci.Move, Target: aci.Px(100, 90)})
	for i, fill := range []func(){func() {}, func() { r.Fill(90, 80, 30, 30, 0xff0000) }, func() { r.Fill(0, testH-3, testW, 3, 0x00ff00) }} {
		fill()
		shot, err := d.cl.Screenshot(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if want := getImage(); !bytes.Equal(shot.Data, want) {
			n, at := 0, -1
			for j := range want {
				if shot.Data[j] != want[j] {
					if at < 0 {
						at = j / 3
					}
					n++
				}
			}
			t.Fatalf("capture %d: %d bytes differ from GetImage's, the first at pixel (%d,%d)", i, n, at%testW, at/testW)
		}
	}
	// Only the rows DAMAGE says were drawn since the last capture are
	// hashed: small fills anywhere, each followed at once by a capture,
	// must all show, and so must a fill drawn just after the capture before.
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 60 {
		w, h := 1+rng.IntN(40), 1+rng.IntN(20)
		x0, y0 := rng.IntN(testW-w+1), rng.IntN(testH-h+1)
		r.Fill(x0, y0, w, h, rng.Uint32()&0xffffff)
		if i%3 == 0 {
			r.Fill(rng.IntN(testW), rng.IntN(testH), 1, 1, rng.Uint32()&0xffffff)
		}
		shot, err := d.cl.Screenshot(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(shot.Data, getImage()) {
			t.Fatalf("fill %d (%dx%d at %d,%d): the capture misses pixels GetImage shows", i, w, h, x0, y0)
		}
	}
	if _, n, _ := xvfbSegment(t, d.sess.XPid()); n < 2 {
		t.Fatalf("framebuffer segment attached %d times; want Xvfb and guestd (captures fell back to GetImage)", n)
	}
}
