package process

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/shinken-rl/shinken/pool"
)

// command builds the init's command line.
func (p *Provider) command(spec pool.Spec, b *box, relaunch bool, uid, gid int) (*exec.Cmd, error) {
	nproc := p.opts.NProc
	if spec.Pids > 0 {
		nproc = uint64(spec.Pids)
	}
	home, tmp, sock := sandboxHome, "/tmp", sandboxRun+"/guest.sock"
	if !p.confined {
		home, tmp, sock = filepath.Join(b.dir, "home"), filepath.Join(b.dir, "tmp"), b.guestSock()
	}
	args := spec.SessionArgs(":"+strconv.Itoa(b.display), "unix:"+sock, home+"/.shinken", relaunch)
	if uid >= 0 {
		// guestd stays root in the sandbox (with a few capabilities); the
		// agent's desktop runs as uid, verifiers as a uid of their own.
		args = append(args, "--agent-uid", strconv.Itoa(uid), "--agent-gid", strconv.Itoa(gid),
			"--scorer-uid", strconv.Itoa(scorerUID(uid)), "--scorer-gid", strconv.Itoa(scorerUID(uid)),
			"--helper-uid", strconv.Itoa(helperUID(uid)), "--helper-gid", strconv.Itoa(helperUID(uid)))
		if b.cg != nil {
			args = append(args, "--cgroups", sandboxCgroupDir)
		}
	}
	env := []string{
		"HOME=" + home,
		"USER=agent",
		"LOGNAME=agent",
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"LANG=C.UTF-8",
		"TMPDIR=" + tmp,
		"XDG_RUNTIME_DIR=" + tmp + "/runtime",
		"NO_AT_BRIDGE=1",
	}
	if !p.confined {
		cmd := exec.Command(p.guestd, args...)
		cmd.Env = env
		cmd.Dir = home
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd, nil
	}
	cfg := initConfig{
		Guestd:  p.guestd,
		Args:    args,
		Env:     env,
		Dir:     b.dir,
		Hide:    []string{p.opts.Root},
		UID:     -1,
		GID:     -1,
		NoFile:  p.opts.NoFile,
		NProc:   nproc,
		ShmSize: p.opts.ShmBytes,
		FSize:   uint64(p.opts.FileBytes),
		OOMAdj:  sandboxOOMScoreAdj,
	}
	if b.cg != nil {
		cfg.Cgroups = b.cg.binds()
		cfg.Gate = true
	}
	if uid >= 0 {
		cfg.KeepCaps = guestdCaps
	}
	js, err := json.Marshal(&cfg)
	if err != nil {
		return nil, fmt.Errorf("process: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"shinken-sandbox-init"}
	cmd.Env = []string{initEnv + "=" + string(js)}
	cmd.Dir = "/"
	cmd.SysProcAttr = sysProcAttr()
	return cmd, nil
}

// guestdCaps are the capabilities a root guestd keeps: CAP_CHOWN,
// CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_KILL, CAP_SETGID,
// CAP_SETUID, and CAP_SYS_PTRACE, with which it reads what the desktop's
// threads are blocked in to end a settle early (guest/quiesce.go); its pid
// namespace holds only the sandbox's processes, which CAP_SETUID already
// puts in its reach.
var guestdCaps = []int{0, 1, 2, 3, 5, 6, 7, 19}

// uidsPerSandbox is how many uids one sandbox claims: its agent's, its
// verifiers' (scorerUID) and its desktop's own (helperUID).
const uidsPerSandbox = 3

// scorerUID is the uid a sandbox's verifiers run as: the other half of the
// pair its agent's uid was claimed with, so no agent of any sandbox on the
// host shares it.
func scorerUID(agent int) int { return agent + 1 }

// helperUID is the uid the sandbox's window manager runs as: the third of
// its claim, neither the agent's nor any verifier's.
func helperUID(agent int) int { return agent + 2 }

// maxSockPath is the longest unix socket path that fits sockaddr_un.
const maxSockPath = 107

// guestSock is the guest socket's host path.
func (b *box) guestSock() string { return filepath.Join(b.dir, "run", "guest.sock") }
