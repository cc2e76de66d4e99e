package guest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/shinken-rl/shinken/guest/hostdeps"
)

// The desktop's message bus: one dbus-daemon running as the agent, the
// session bus and the AT-SPI (accessibility) bus at once, plus the AT-SPI
// registry on it. Apps started in the session get its address under both
// names, so toolkits with an accessibility bridge (GTK's atk-bridge) export
// their widget trees; guestd (root or the agent) reads them. A desktop
// usually runs a second daemon for the accessibility bus to keep its
// traffic apart; here both buses are the agent's alone, and one daemon is
// one start less per boot (docs/architecture.md, "Sandbox lifecycle and
// reset in place").

// HasA11y reports whether this system has what an accessibility bus needs.
func HasA11y() bool { return hostdeps.HasA11y() }

func findRegistryd() string { return hostdeps.FindRegistryd() }

// Bus is the session's running bus.
type Bus struct {
	dir    string // its configuration
	tmp    bool   // dir is its own, removed by Close
	addr   string // the bus's address, session and accessibility alike
	procs  []busProc
	alive  atomic.Bool
	closed atomic.Bool
}

type busProc struct {
	name string
	pid  int
	done chan struct{}
}

// busConf is a bus configuration: listen on the bus's abstract socket,
// authenticate by uid, and let the daemon's own uid, root (guestd) and the
// agent (by its name in the daemon's password entries, "agent") connect
// and talk to anyone.
const busConf = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>%s</type>
  <listen>%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="root"/>
    <allow user="agent"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
  <limit name="max_message_size">67108864</limit>
  <limit name="reply_timeout">60000</limit>
</busconfig>
`

// StartBus starts the bus (session and accessibility) and the AT-SPI
// registry as as (nil: this process's identity), with env and display, and
// returns once the registry owns its name on the accessibility bus. On
// failure everything started is ended.
//
// The bus listens on an abstract socket named after the display: a sandbox
// has a network namespace of its own, so the name is the sandbox's, and no
// directory the agent can write holds it. The address is the same each
// time the bus starts on that display, so a bus started afresh by a reset in
// place (Session.Restart) is found by apps under the address guestd gave
// them. Its configuration lives in dir (nil: a fresh temporary directory),
// which guestd owns and the agent can read but not write.
//
// as runs the daemon and the registry (nil: this process's identity);
// client, when set, is the identity of the apps that connect (the agent's),
// where it is not as.
func StartBus(ctx context.Context, display string, env []string, as, client *Identity, dir, logDir string) (*Bus, error) {
	reg := findRegistryd()
	if reg == "" {
		return nil, errors.New("guest: bus: at-spi2-registryd not found (Debian package at-spi2-core)")
	}
	b := &Bus{addr: busAddress(display)}
	if dir == "" {
		d, err := os.MkdirTemp("", "shinken-bus-")
		if err != nil {
			return nil, fmt.Errorf("guest: bus: %w", err)
		}
		dir, b.tmp = d, true
	} else if err := freshDir(dir); err != nil {
		return nil, fmt.Errorf("guest: bus: %w", err)
	}
	b.dir = dir
	fail := func(err error) (*Bus, error) {
		b.Close()
		return nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return fail(fmt.Errorf("guest: bus: %w", err))
	}
	env = withoutKeys(env, "NO_AT_BRIDGE", "DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS")
	env = withDefault(env, "DISPLAY", display)
	denv, err := daemonEnv(dir, env, as, client)
	if err != nil {
		return fail(err)
	}
	conf := filepath.Join(dir, "session.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(busConf, "session", b.addr)), 0o644); err != nil {
		return fail(fmt.Errorf("guest: bus: %w", err))
	}
	if err := b.startDaemon(ctx, "session", conf, denv, as, logDir); err != nil {
		return fail(err)
	}
	renv := append(env[:len(env):len(env)], b.Env()...)
	cmd := &exec.Cmd{Path: reg, Args: []string{reg}, Env: renv}
	if err := b.start(cmd, "at-spi2-registryd", as, logDir); err != nil {
		return fail(err)
	}
	if err := waitName(ctx, b.addr, "org.a11y.atspi.Registry", b.procs[len(b.procs)-1].done); err != nil {
		return fail(err)
	}
	b.alive.Store(true)
	return b, nil
}

// busAddress is the bus's address on display: an abstract socket of the
// sandbox's network namespace (no guid: a restarted daemon has a new one).
func busAddress(display string) string {
	n := strings.TrimPrefix(display, ":")
	n, _, _ = strings.Cut(n, ".")
	return "unix:abstract=shinken-bus-" + n
}

// freshDir makes dir an empty directory of this process's, whatever was
// there (nothing in it is followed: RemoveAll unlinks links).
func freshDir(dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

// startDaemon starts one dbus-daemon and waits for the address it prints
// once it listens.
func (b *Bus) startDaemon(ctx context.Context, kind, conf string, env []string, as *Identity, logDir string) error {
	path, err := exec.LookPath(hostdeps.BusDaemon)
	if err != nil {
		return fmt.Errorf("guest: bus: %w", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	cmd := &exec.Cmd{Path: path, Args: []string{hostdeps.BusDaemon, "--config-file=" + conf, "--nofork", "--nopidfile", "--print-address=3"}, Env: env, ExtraFiles: []*os.File{w}}
	err = b.start(cmd, kind+" bus", as, logDir)
	w.Close()
	if err != nil {
		return err
	}
	done := b.procs[len(b.procs)-1].done
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case addr := <-got:
		if addr == "" {
			return fmt.Errorf("guest: %s bus printed no address", kind)
		}
		return nil
	case <-done:
		return fmt.Errorf("guest: %s bus exited during start-up", kind)
	case <-ctx.Done():
		r.SetReadDeadline(time.Now())
		return fmt.Errorf("guest: waiting for the %s bus: %w", kind, ctx.Err())
	}
}

func (b *Bus) start(cmd *exec.Cmd, name string, as *Identity, logDir string) error {
	logf, err := logFile(logDir, "bus.log")
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	as.credential(cmd)
	pid, wait, err := startChild(cmd)
	logf.Close()
	if err != nil {
		return fmt.Errorf("guest: start %s: %w", name, err)
	}
	p := busProc{name: name, pid: pid, done: make(chan struct{})}
	go func() {
		<-wait
		b.alive.Store(false)
		close(p.done)
	}()
	b.procs = append(b.procs, p)
	return nil
}

// waitName probes until name has an owner on the bus at addr.
func waitName(ctx context.Context, addr, name string, died <-chan struct{}) error {
	var conn *dbus.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	return probe(ctx, "waiting for "+name, func() bool {
		if conn == nil {
			c, err := dbus.Connect(addr, dbus.WithContext(ctx))
			if err != nil {
				return false
			}
			conn = c
		}
		var has bool
		err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, name).Store(&has)
		return err == nil && has
	}, died)
}

// nssWrapper is the NSS shim that lends a dbus-daemon password entries
// (Debian libnss-wrapper).
var nssWrapper = []string{"/usr/lib/x86_64-linux-gnu/libnss_wrapper.so", "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so", "/usr/lib/libnss_wrapper.so"}

// daemonEnv is the environment of the bus daemons. dbus-daemon looks up
// every connecting uid in the password database (its groups decide policy)
// and drops a connection whose uid has none; a sandbox's uids may have no
// entry (the host's /etc, read-only). Then the daemons get entries through
// nss_wrapper: root, the daemon's own uid ("desktop") and the client's
// ("agent"), in files in the bus directory. Where the daemon runs as the
// client, its entry is "agent".
func daemonEnv(dir string, env []string, as, client *Identity) ([]string, error) {
	if !as.distinct() && !client.distinct() {
		return env, nil
	}
	if client == nil || (as != nil && client.UID == as.UID) {
		client, as = as, nil
	}
	known := true
	for _, id := range []*Identity{as, client} {
		if id != nil {
			if _, err := user.LookupId(strconv.Itoa(id.UID)); err != nil {
				known = false
			}
		}
	}
	if known {
		return env, nil
	}
	lib := ""
	for _, p := range nssWrapper {
		if _, err := os.Stat(p); err == nil {
			lib = p
			break
		}
	}
	if lib == "" {
		return nil, fmt.Errorf("guest: bus: uid %d has no password entry and libnss_wrapper is missing (Debian libnss-wrapper)", as.UID)
	}
	passwd, group := "root:x:0:0:root:/root:/bin/sh\n", "root:x:0:\n"
	for _, e := range []struct {
		name string
		id   *Identity
	}{{"agent", client}, {"desktop", as}} {
		if e.id != nil {
			passwd += fmt.Sprintf("%s:x:%d:%d:%s:/nonexistent:/bin/sh\n", e.name, e.id.UID, e.id.GID, e.name)
			group += fmt.Sprintf("%s:x:%d:\n", e.name, e.id.GID)
		}
	}
	for name, body := range map[string]string{"passwd": passwd, "group": group} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			return nil, fmt.Errorf("guest: bus: %w", err)
		}
	}
	return append(env[:len(env):len(env)], "LD_PRELOAD="+lib, "NSS_WRAPPER_PASSWD="+filepath.Join(dir, "passwd"), "NSS_WRAPPER_GROUP="+filepath.Join(dir, "group")), nil
}

// Env is what apps in the session need to find the buses.
func (b *Bus) Env() []string {
	// GTK 3 bridges on its own; GTK 2 apps (pcmanfm) load the bridge as a
	// module.
	return []string{"DBUS_SESSION_BUS_ADDRESS=" + b.addr, "AT_SPI_BUS_ADDRESS=" + b.addr, "GTK_MODULES=gail:atk-bridge"}
}

// A11yAddress is the accessibility bus's address (the session bus's).
func (b *Bus) A11yAddress() string { return b.addr }

// Alive reports whether the daemons and the registry all still run.
func (b *Bus) Alive() bool { return b.alive.Load() }

// Pids lists the bus processes.
func (b *Bus) Pids() []int {
	out := make([]int, 0, len(b.procs))
	for _, p := range b.procs {
		out = append(out, p.pid)
	}
	return out
}

// Close ends the registry and the daemons and removes their directory.
func (b *Bus) Close() error {
	if b == nil || !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	for i := len(b.procs) - 1; i >= 0; i-- {
		p := b.procs[i]
		signalGroup(p.pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(2 * time.Second):
			signalGroup(p.pid, syscall.SIGKILL)
			<-p.done
		}
		signalGroup(p.pid, syscall.SIGKILL)
	}
	if b.tmp {
		os.RemoveAll(b.dir)
	}
	return nil
}

// withoutKeys drops KEY=... entries for the given keys.
func withoutKeys(env []string, keys ...string) []string {
	out := make([]string, 0, len(env))
outer:
	for _, kv := range env {
		for _, k := range keys {
			if strings.HasPrefix(kv, k+"=") {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}

// startBus starts the session's buses; a failure is logged and the session
// runs without an accessibility tree.
func (s *Session) startBus(ctx context.Context, cfg SessionConfig) {
	if !HasA11y() {
		cfg.Logf("guest: no dbus-daemon or at-spi2-registryd: the session has no accessibility bus")
		return
	}
	dir := ""
	if cfg.RunDir != "" {
		dir = filepath.Join(cfg.RunDir, "bus")
	}
	as, client := cfg.WMAs, (*Identity)(nil)
	if s.ownHelpers() {
		as, client = cfg.Helper, cfg.WMAs
	}
	b, err := StartBus(ctx, cfg.Display, cfg.Env, as, client, dir, cfg.LogDir)
	if err != nil {
		msg := ""
		if cfg.LogDir != "" {
			if b, rerr := os.ReadFile(filepath.Join(cfg.LogDir, "bus.log")); rerr == nil && len(b) > 0 {
				msg = " (bus.log: " + strings.TrimSpace(string(b[max(0, len(b)-600):])) + ")"
			}
		}
		cfg.Logf("guest: %v%s: the session has no accessibility bus", err, msg)
		return
	}
	s.mu.Lock()
	s.bus = b
	s.mu.Unlock()
}

// Bus returns the session's buses, nil without them.
func (s *Session) Bus() *Bus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bus
}

// BusEnv is what an app needs to find the session's buses (nil without).
func (s *Session) BusEnv() []string {
	if b := s.Bus(); b != nil {
		return b.Env()
	}
	return nil
}

// AppEnv is env for apps of the session: with the buses, their addresses
// and no NO_AT_BRIDGE, so that toolkits export their accessibility trees.
func (s *Session) AppEnv(env []string) []string {
	b := s.Bus()
	if b == nil {
		return env
	}
	env = withoutKeys(env, "NO_AT_BRIDGE", "DBUS_SESSION_BUS_ADDRESS", "AT_SPI_BUS_ADDRESS", "GTK_MODULES")
	return append(env, b.Env()...)
}
