package guest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/atomicfile"
	"golang.org/x/sys/unix"
)

const (
	defaultExecTimeout = 60 * time.Second
	maxExecTimeout     = 10 * time.Minute
	// pipeGrace is how long output pipes may stay open after the command
	// exits (held by a background descendant) before they are abandoned.
	pipeGrace = 500 * time.Millisecond
)

func (s *Server) exec(ctx context.Context, a wire.ExecArgs, chunk func(any) error) (*wire.ExecResult, error) {
	var argv []string
	switch {
	case len(a.Argv) > 0 && a.Shell != "":
		return nil, aci.Errorf(aci.CodeBadRequest, "exec: argv and shell are exclusive")
	case len(a.Argv) > 0:
		argv = a.Argv
	case a.Shell != "":
		argv = []string{"/bin/sh", "-c", a.Shell}
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "exec: need argv or shell")
	}
	timeout := defaultExecTimeout
	if a.TimeoutMS > 0 {
		timeout = min(time.Duration(a.TimeoutMS)*time.Millisecond, maxExecTimeout)
	}
	select {
	case s.execs <- struct{}{}:
		defer func() { <-s.execs }()
	default:
		return nil, aci.Errorf(aci.CodeBusy, "exec: %d commands already running", cap(s.execs))
	}

	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, aci.Errorf(aci.CodeNotFound, "exec: %v", err)
	}
	cmd := &exec.Cmd{Path: path, Args: argv, Dir: a.Cwd, Env: append(append([]string(nil), s.cfg.Env...), a.Env...)}
	if cmd.Dir == "" {
		cmd.Dir = envHome(cmd.Env)
	}
	var stream func([]byte, string)
	if a.Stream {
		var mu sync.Mutex
		seq := 0
		stream = func(b []byte, name string) {
			mu.Lock()
			chunk(wire.ExecChunk{Seq: seq, Stream: name, Data: b})
			seq++
			mu.Unlock()
		}
	}
	return s.run(ctx, cmd, a.Stdin, timeout, stream, s.startAgent, nil)
}

// run starts cmd with stdin (through start), collects (or streams) its output and waits for
// it within timeout. onExit, when set, runs once the command ended and
// before its output is drained (the scorer ends the verifier's leftovers
// there); otherwise a background descendant may hold the output open for
// pipeGrace.
func (s *Server) run(ctx context.Context, cmd *exec.Cmd, stdin []byte, timeout time.Duration, stream func([]byte, string),
	start func(*exec.Cmd) (int, <-chan unix.WaitStatus, error), onExit func(pid int)) (*wire.ExecResult, error) {
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	var stdinW *os.File
	if len(stdin) > 0 {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		closers = append(closers, r)
		cmd.Stdin, stdinW = r, w
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	closers = append(closers, outW, errW)
	cmd.Stdout, cmd.Stderr = outW, errW

	t0 := time.Now()
	pid, waitc, err := start(cmd)
	if err != nil {
		outR.Close()
		errR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		if errors.Is(err, syscall.EAGAIN) {
			return nil, startError("exec", cmd.Args[0], err)
		}
		return nil, aci.Errorf(aci.CodeNotFound, "exec: start %s: %v", cmd.Args[0], err)
	}
	for _, f := range closers { // the child holds its own copies now
		f.Close()
	}
	closers = nil
	if stdinW != nil {
		go func() {
			stdinW.Write(stdin)
			stdinW.Close()
		}()
	}

	var res wire.ExecResult
	collect := func(r *os.File, name string, dst *[]byte, trunc *bool) {
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Read(buf)
			if n > 0 {
				if stream != nil {
					stream(buf[:n], name)
				} else {
					room := wire.ExecOutputCap - len(*dst)
					if n > room {
						*trunc = true
					}
					*dst = append(*dst, buf[:min(n, max(room, 0))]...)
				}
			}
			if err != nil {
				return
			}
		}
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go func() { defer readers.Done(); collect(outR, "stdout", &res.Stdout, &res.StdoutTruncated) }()
	go func() { defer readers.Done(); collect(errR, "stderr", &res.Stderr, &res.StderrTruncated) }()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ws unix.WaitStatus
	select {
	case ws = <-waitc:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
		res.TimedOut = true
	}
	if res.TimedOut {
		signalGroup(pid, syscall.SIGKILL)
		ws = <-waitc
	}
	if onExit != nil {
		onExit(pid)
	}
	// Output pipes close when the last holder exits; a background descendant
	// may keep them open, so wait only a grace period.
	readersDone := make(chan struct{})
	go func() { readers.Wait(); close(readersDone) }()
	select {
	case <-readersDone:
	case <-time.After(pipeGrace):
		outR.SetReadDeadline(time.Now())
		errR.SetReadDeadline(time.Now())
		<-readersDone
	}
	outR.Close()
	errR.Close()

	res.DurationMS = time.Since(t0).Milliseconds()
	switch {
	case res.TimedOut:
		res.Signal = "SIGKILL"
	case ws.Exited():
		code := ws.ExitStatus()
		res.ExitCode = &code
	case ws.Signaled():
		res.Signal = unix.SignalName(ws.Signal())
	}
	return &res, nil
}

// envHome returns HOME from env, or "/".
func envHome(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if len(env[i]) > 5 && env[i][:5] == "HOME=" {
			return env[i][5:]
		}
	}
	return "/"
}

// putFile writes a.Data to a.Path crash-safe (temp file, fsync, rename),
// creating parent directories.
func putFile(a wire.PutFileArgs) error {
	path, mode, err := putArgs(a, "", 0o7777)
	if err != nil {
		return err
	}
	if err := writeFileAtomic(path, a.Data, mode); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "put_file: %v", err)
	}
	return nil
}

// putArgs checks a put_file's path and size and resolves its mode (bits
// kept by keep; default 0644). With home set, a leading "~/" is home.
func putArgs(a wire.PutFileArgs, home string, keep os.FileMode) (string, os.FileMode, error) {
	p := a.Path
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		p = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		return "", 0, aci.Errorf(aci.CodeBadRequest, "put_file: path %q is not absolute", a.Path)
	}
	if len(a.Data) > wire.MaxPutFile {
		return "", 0, aci.Errorf(aci.CodeTooLarge, "put_file: %d bytes exceeds %d", len(a.Data), wire.MaxPutFile)
	}
	mode := os.FileMode(a.Mode) & keep
	if mode == 0 {
		mode = 0o644
	}
	return p, mode, nil
}

// putAgentFile writes a task instance's file as the agent would: on one
// locked thread whose filesystem uid and gid are the agent's (setfsuid is
// per thread, and a non-zero fsuid drops the thread's file capabilities),
// so the file and its parents are the agent's, and every check along the
// path is the agent's own: a link it planted leads nowhere it could not
// write itself. No process is started; it costs a few system calls, where
// an exec of a shell as the agent costs a fork, an exec and a wait.
func (s *Server) putAgentFile(a wire.PutFileArgs) error {
	p, mode, err := putArgs(a, envHome(s.cfg.Env), 0o777)
	if err != nil {
		return err
	}
	if err := s.asAgentFS(func() error { return writeAgentFile(p, a.Data, mode) }); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "put_file %s: %v", a.Path, err)
	}
	return nil
}

// getAgentFile reads one of the agent's files for the trainer with the
// agent's filesystem identity, through the verifier library's safe reader
// (Check read): a link below the home, a FIFO, a directory or a file over
// MaxGetFile is refused, typed, and never blocks.
func (s *Server) getAgentFile(a wire.GetFileArgs) (*wire.GetFileResult, error) {
	home := envHome(s.cfg.Env)
	p := a.Path
	if rest, ok := strings.CutPrefix(p, "~/"); ok && home != "" {
		p = filepath.Join(home, rest)
	}
	if !filepath.IsAbs(p) {
		return nil, aci.Errorf(aci.CodeBadRequest, "get_file: path %q is not absolute (or ~/...)", a.Path)
	}
	var out, msg bytes.Buffer
	status := CheckUsage
	if err := s.asAgentFS(func() error { status = Check([]string{"bytes", p}, home, &out, &msg); return nil }); err != nil {
		return nil, aci.Errorf(aci.CodeBadRequest, "get_file %s: %v", a.Path, err)
	}
	why := strings.TrimSpace(msg.String())
	switch status {
	case CheckOK:
		return &wire.GetFileResult{Data: out.Bytes()}, nil
	case CheckMissing:
		return nil, aci.Errorf(aci.CodeNotFound, "get_file: %s", why)
	case CheckTooLarge:
		return nil, aci.Errorf(aci.CodeTooLarge, "get_file: %s", why)
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "get_file: %s", why)
	}
}

// asAgentFS runs f on one locked thread whose filesystem uid and gid are
// the agent's (setfsuid is per thread, and a non-zero fsuid drops the
// thread's file capabilities): every check f's file calls make is the
// agent's own. Where the agent has no identity of its own, f runs as is.
func (s *Server) asAgentFS(f func() error) error {
	id := s.cfg.Agent
	if !id.distinct() {
		return f()
	}
	// A goroutine of its own: should its thread fail to get guestd's
	// identity back, the goroutine ends locked to it and Go ends the thread.
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		uid, gid := os.Geteuid(), os.Getegid()
		_ = unix.Setfsgid(id.GID)
		_ = unix.Setfsuid(id.UID)
		// -1 changes nothing and returns the thread's fsuid (fsgid).
		var err error
		if cu, _ := unix.SetfsuidRetUid(-1); cu != id.UID {
			err = errors.New("cannot take the agent's filesystem identity")
		} else {
			err = f()
		}
		_ = unix.Setfsuid(uid)
		_ = unix.Setfsgid(gid)
		cu, _ := unix.SetfsuidRetUid(-1)
		cg, _ := unix.SetfsgidRetGid(-1)
		if cu == uid && cg == gid {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

func writeAgentFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// O_NONBLOCK: a FIFO planted where the file goes fails at once (no
	// reader) instead of holding this thread forever; anything but a
	// regular file is refused before a byte is written.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|unix.O_NOFOLLOW|unix.O_NONBLOCK, mode)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = fmt.Errorf("%s is not a regular file", path)
		}
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return atomicfile.Write(path, data, mode)
}

// asAgent makes cmd run as the agent's identity (apps, commands the host
// runs for setup, the window manager).
func (s *Server) asAgent(cmd *exec.Cmd) { s.cfg.Agent.credential(cmd) }

// Isolated reports whether verifiers run as an identity the agent's
// processes cannot signal, trace or open: a scoring identity distinct from
// the agent's, and guestd itself neither.
func (s *Server) Isolated() bool {
	return s.cfg.Agent.distinct() && s.cfg.Scorer.distinct() && s.cfg.Agent.UID != s.cfg.Scorer.UID
}

// startAgent starts cmd as the agent (see procTable.start), in the agent's
// cgroups from its first instruction.
func (s *Server) startAgent(cmd *exec.Cmd) (int, <-chan unix.WaitStatus, error) {
	s.asAgent(cmd)
	start := s.procs.start
	if s.idle != nil {
		start = s.idle.wrap(start)
	}
	return s.cfg.AgentCgroups.Start(cmd, start)
}
