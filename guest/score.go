package guest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

// freezeTimeout bounds the freeze before a verifier runs.
const freezeTimeout = 5 * time.Second

// runScore is the score method: it stops every process the agent could have
// started, then runs the verifier as the scoring identity with its own HOME
// and working directory, and ends whatever the verifier left behind before
// reading its output, so nothing but the verifier writes to it. The agent's
// processes stay stopped: the episode is over. Score takes no exec slot, so
// the agent can never starve it.
func (s *Server) runScore(ctx context.Context, a wire.ScoreArgs) (*wire.ScoreResult, error) {
	var argv []string
	var stdin []byte
	switch {
	case len(a.Argv) > 0 && a.Shell != "":
		return nil, aci.Errorf(aci.CodeBadRequest, "score: argv and shell are exclusive")
	case len(a.Argv) > 0:
		argv = a.Argv
	case a.Shell != "":
		// The verifier library comes first (docs/architecture.md,
		// "Verifiers read the agent's files safely").
		argv, stdin = []string{"/bin/sh", "-s"}, withVerifierPrelude(a.Shell)
	default:
		return nil, aci.Errorf(aci.CodeBadRequest, "score: need argv or shell")
	}
	timeout := defaultExecTimeout
	if a.TimeoutMS > 0 {
		timeout = min(time.Duration(a.TimeoutMS)*time.Millisecond, maxExecTimeout)
	}
	s.score.Lock()
	defer s.score.Unlock()

	t0 := time.Now()
	fctx, cancel := context.WithTimeout(ctx, freezeTimeout)
	// The cgroup freezer stops the agent's cgroup at once where the host
	// has one; the sweep then stops whatever is left.
	if err := s.cfg.AgentCgroups.Freeze(fctx); err != nil {
		s.cfg.Logf("guest: score: %v; the sweep stops the agent's processes", err)
	}
	n, err := freeze(fctx, s.cfg.exempt())
	cancel()
	if err != nil {
		return nil, err
	}
	out := &wire.ScoreResult{Frozen: n, FreezeUS: time.Since(t0).Microseconds(), Isolated: s.Isolated()}

	path, err := exec.LookPath(argv[0])
	if err != nil {
		return nil, aci.Errorf(aci.CodeNotFound, "score: %v", err)
	}
	home, err := os.MkdirTemp("", "shinken-score-")
	if err != nil {
		return nil, fmt.Errorf("score: home: %w", err)
	}
	defer os.RemoveAll(home)
	if s.cfg.Scorer.distinct() {
		if err := os.Chown(home, s.cfg.Scorer.UID, s.cfg.Scorer.GID); err != nil {
			return nil, fmt.Errorf("score: home: %w", err)
		}
	}
	env := append([]string(nil), s.cfg.Env...)
	env = setEnvVar(env, "AGENT_HOME", envHome(s.cfg.Env))
	// The web apps' state, the ground truth of a web task, goes to the
	// verifier alone (web.go).
	if n, err := s.web.writeStates(filepath.Join(home, "web"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_WEB", filepath.Join(home, "web"))
	}
	if n, err := exportBrowser(envHome(s.cfg.Env), filepath.Join(home, "browser"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_BROWSER", filepath.Join(home, "browser"))
	}
	if n, err := exportApps(envHome(s.cfg.Env), filepath.Join(home, "apps"), s.cfg.Scorer); err != nil {
		return nil, fmt.Errorf("score: %w", err)
	} else if n > 0 {
		env = setEnvVar(env, "SK_APPS", filepath.Join(home, "apps"))
	}
	for _, k := range []string{"HOME", "TMPDIR", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"} {
		env = setEnvVar(env, k, home)
	}
	// No session variable reaches the verifier (no X server, no bus the
	// agent's clients share); $SK_GUESTD names the library's binary.
	env = verifierEnv(append(env, a.Env...))
	cmd := &exec.Cmd{Path: path, Args: argv, Env: env, Dir: home}
	s.cfg.Scorer.credential(cmd)
	res, err := s.run(ctx, cmd, stdin, timeout, nil, s.procs.start, func(pid int) {
		signalGroup(pid, syscall.SIGKILL)
		if s.cfg.Scorer.distinct() {
			killUID(s.cfg.Scorer.UID)
		}
	})
	if err != nil {
		return nil, err
	}
	out.ExecResult = *res
	return out, nil
}

func setEnvVar(env []string, key, val string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return append(out, key+"="+val)
}
