package guest

import (
	"bufio"
	"encoding/binary"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/jezek/xgb/xfixes"
	"github.com/shinken-rl/shinken/aci"
	"golang.org/x/sys/unix"
)

// Reading the screen where the X server keeps it.
//
// Xvfb started with -shmem keeps its framebuffer in a System V shared
// memory segment: an XWD file header, a colormap, then the pixels. A
// capture that reads them there costs the X server nothing, where
// GetImage has it copy the whole screen into our segment first, about a
// millisecond of its CPU per changed frame (docs/architecture.md, "Cost of a
// step"). The read is made atomic by grabbing the server: once a round trip
// after GrabServer has come back, no other client's request runs until
// UngrabServer, so nothing draws during the read. The pointer is kept out
// of the pixels, as GetImage keeps it out, by hiding the cursor (XFIXES)
// for as long as guestd's connection lives.
//
// The segment is the X server's; the session that starts Xvfb makes it
// private to guestd's user before any app runs (restrictFramebuffer). A
// capture reads it only when it is private, so no other user's process
// can have drawn into it behind the damage guestd tracks.

// framebuffer is an X server's screen pixels, attached read-only.
type framebuffer struct {
	mem    []byte // the whole segment
	px     []byte // the pixels: 32-bit BGRX rows of stride bytes
	stride int
}

// rect returns r's pixels: the first row and the stride between rows.
func (f *framebuffer) rect(r aci.Rect) ([]byte, int) {
	return f.px[r.Y*f.stride+r.X*4:], f.stride
}

func (f *framebuffer) detach() { unix.SysvShmDetach(f.mem) }

// shmSegment is one line of /proc/sysvipc/shm.
type shmSegment struct {
	id, perms, cpid, cuid int
}

// shmSegments lists the System V segments of this IPC namespace.
func shmSegments() ([]shmSegment, error) {
	f, err := os.Open("/proc/sysvipc/shm")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []shmSegment
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// key shmid perms size cpid lpid nattch uid gid cuid cgid ...
		fl := strings.Fields(sc.Text())
		if len(fl) < 11 {
			continue
		}
		var s shmSegment
		var e [4]error
		s.id, e[0] = strconv.Atoi(fl[1])
		var perms uint64
		perms, e[1] = strconv.ParseUint(fl[2], 8, 32)
		s.perms = int(perms)
		s.cpid, e[2] = strconv.Atoi(fl[4])
		s.cuid, e[3] = strconv.Atoi(fl[9])
		if e[0] == nil && e[1] == nil && e[2] == nil && e[3] == nil {
			out = append(out, s)
		}
	}
	return out, sc.Err()
}

// restrictFramebuffer makes the framebuffer segments the X server xpid
// created private to this user (mode 0600) and marks them for removal, so
// they go with the X server whatever ends it. It runs before any app is
// started; a server without -shmem has none.
func restrictFramebuffer(xpid int) {
	segs, _ := shmSegments()
	for _, s := range segs {
		if s.cpid != xpid || s.cuid != os.Getuid() {
			continue
		}
		var ds unix.SysvShmDesc
		if _, err := unix.SysvShmCtl(s.id, unix.IPC_STAT, &ds); err != nil {
			continue
		}
		ds.Perm.Mode = 0o600
		unix.SysvShmCtl(s.id, unix.IPC_SET, &ds)
		unix.SysvShmCtl(s.id, unix.IPC_RMID, nil)
	}
}

// peerPID is the pid of the process at the other end of a unix socket.
func peerPID(nc net.Conn) int {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	raw.Control(func(fd uintptr) {
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}

// xwdHeader is the part of an XWD file header (big-endian 32-bit fields)
// that says where and how the pixels lie.
type xwdHeader struct {
	size, depth, w, h, byteOrder, bpp, stride, class, red, green, blue, ncolors uint32
}

func parseXWD(b []byte) (xwdHeader, bool) {
	if len(b) < 100 {
		return xwdHeader{}, false
	}
	f := func(i int) uint32 { return binary.BigEndian.Uint32(b[i*4:]) }
	return xwdHeader{size: f(0), depth: f(3), w: f(4), h: f(5), byteOrder: f(7), bpp: f(11), stride: f(12),
		class: f(13), red: f(14), green: f(15), blue: f(16), ncolors: f(19)}, true
}

// xwdColorSize is the size of one XWD colormap entry.
const xwdColorSize = 12

// findFramebuffer attaches, read-only, the framebuffer of the X server at
// the other end of nc: a private segment of this user's that it created,
// whose header describes a w×h screen of 32-bit little-endian pixels with
// red, green and blue where BGRX has them. nil when there is none; captures
// then use GetImage.
func findFramebuffer(nc net.Conn, w, h int) *framebuffer {
	pid := peerPID(nc)
	if pid <= 0 {
		return nil
	}
	segs, _ := shmSegments()
	for _, s := range segs {
		if s.cpid != pid || s.cuid != os.Getuid() || s.perms&0o077 != 0 {
			continue
		}
		mem, err := unix.SysvShmAttach(s.id, 0, unix.SHM_RDONLY)
		if err != nil {
			continue
		}
		hd, ok := parseXWD(mem)
		off := int(hd.size) + int(hd.ncolors)*xwdColorSize
		if ok && int(hd.w) == w && int(hd.h) == h && hd.bpp == 32 && hd.depth == 24 && hd.byteOrder == 0 &&
			hd.class == 4 && hd.red == 0xff0000 && hd.green == 0xff00 && hd.blue == 0xff &&
			int(hd.stride) >= w*4 && off > 0 && off+int(hd.stride)*h <= len(mem) {
			return &framebuffer{mem: mem, px: mem[off:], stride: int(hd.stride)}
		}
		unix.SysvShmDetach(mem)
	}
	return nil
}

// initFB finds the framebuffer on first capture (health probes never
// capture) and hides the cursor from it.
func (x *xconn) initFB() {
	if x.fbTried {
		return
	}
	x.fbTried = true
	if !x.dmg.ok {
		return // no XFIXES to hide the cursor with (DAMAGE needs it too)
	}
	fb := findFramebuffer(x.nc, x.w, x.h)
	if fb == nil {
		return
	}
	if err := xfixes.HideCursorChecked(x.c, x.root).Check(); err != nil {
		fb.detach()
		return
	}
	x.fb = fb
}
