package envserver_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool/process"
)

// The fork attacks, played as an agent plays (a shell through launch_app)
// over the real API: before /v1/fork the agent links its home to a
// root-only host file and directory and keeps swapping a directory for a
// link while the fork runs, makes a 100 GB sparse file, and later fills its
// home past the snapshot cap (docs/architecture.md, "Snapshots copy
// safely"). The host's bytes must appear in no fork and nowhere in the
// server's state, the sparse file must cost its data only (or be refused
// at creation), and the cap must answer too_large with the env still
// working.

const forkCap = 96 << 20

func TestForkAttacksProcess(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.SnapshotBytes = forkCap }})
	forkAttacks(t, s)
}

func TestForkAttacksDocker(t *testing.T) {
	s := dockerServer(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.SnapshotBytes = forkCap }})
	forkAttacks(t, s)
}

func forkAttacks(t *testing.T, s *servertest.Server) {
	hostDir := t.TempDir()
	secret := []byte(fmt.Sprintf("host-secret-%d", os.Getpid()))
	if err := os.WriteFile(filepath.Join(hostDir, "secret"), secret, 0o600); err != nil {
		t.Fatal(err)
	}
	var spec api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &spec); err != nil || spec.Pool.Confinement == nil || spec.Pool.Confinement.Limits["snapshot_bytes"] != forkCap {
		t.Errorf("spec pool confinement: %+v (%v); want snapshot_bytes %d", spec.Pool.Confinement, err, forkCap)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	parent := r.Results[0].EnvID
	defer closeEnvs(s, parent)
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: []aci.Action{
		sh(`ln -s "$0/secret" ~/leak; ln -s "$0" ~/dirleak; mkdir -p ~/w; echo mine > ~/w/own
(while :; do rm -rf ~/w/swap; mkdir ~/w/swap; echo decoy > ~/w/swap/f; rm -rf ~/w/swap; ln -s "$0" ~/w/swap; done) >/dev/null 2>&1 &
truncate -s 100G ~/sparse && printf tail | dd of=$HOME/sparse bs=1 seek=107374182396 conv=notrunc 2>/dev/null
touch ~/attacks-ready`, hostDir),
	}}}})
	s.WaitEnv(t, parent, `[ -e ~/attacks-ready ] && [ -L ~/leak ]`)

	var fr api.BatchReply
	if _, _, err := s.Call("/v1/fork", api.ForkRequest{EnvID: parent, N: 2}, &fr); err != nil {
		t.Fatalf("fork: %v", err)
	}
	var kids []string
	for _, res := range fr.Results {
		if res.Error != nil {
			t.Fatalf("fork child: %v", res.Error)
		}
		kids = append(kids, res.EnvID)
	}
	defer closeEnvs(s, kids...)
	for _, kid := range kids {
		s.WaitEnv(t, kid, `[ "$(cat ~/w/own)" = mine ] && [ -L ~/leak ] && ! cat ~/leak 2>/dev/null | grep -q secret`)
		s.WaitEnv(t, kid, `n=$(stat -c %s ~/sparse); [ "$n" = 0 ] || { [ "$n" = 107374182400 ] && [ "$(tail -c 4 ~/sparse)" = tail ]; }`)
		if p, ok := s.Provider.(*process.Provider); ok {
			sb, _ := s.Server.EnvSandbox(kid)
			var st syscall.Stat_t
			if err := syscall.Stat(filepath.Join(p.SandboxDir(sb), "home", "sparse"), &st); err != nil {
				t.Fatal(err)
			}
			// The sandbox's file-size limit (RLIMIT_FSIZE) may refuse the
			// 100 GB length at truncate, as docker's does: contained too.
			if (st.Size != 0 && st.Size != 100<<30) || st.Blocks*512 > 16<<20 {
				t.Errorf("fork's sparse file on the host: size %d, %d bytes allocated; want 100 GB with holes kept (or refused at creation)", st.Size, st.Blocks*512)
			}
		}
	}
	// Nothing under the server's state (sandboxes, snapshots, frames,
	// episodes) holds the host's bytes: links were copied as links.
	err := filepath.WalkDir(s.State, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return nil // a sandbox's file removed during the walk
		}
		if !e.Type().IsRegular() {
			return nil
		}
		// A leak would be a copy of the secret's file: small. (The sparse
		// file is 100 GB long.)
		if info, err := e.Info(); err != nil || info.Size() > 1<<20 {
			return nil
		}
		b, err := os.ReadFile(path)
		if err == nil && bytes.Contains(b, secret) {
			t.Errorf("%s holds the host's secret", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A real file beyond the cap: the fork fails with too_large, and the
	// parent keeps stepping.
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Actions: []aci.Action{
		sh(fmt.Sprintf("rm -f ~/sparse; head -c %d /dev/urandom > ~/big; touch ~/big-ready", forkCap+(16<<20))),
	}}}})
	s.WaitEnv(t, parent, `[ -e ~/big-ready ]`)
	_, _, err = s.Call("/v1/fork", api.ForkRequest{EnvID: parent, N: 1}, &fr)
	if aci.CodeOf(err) != aci.CodeTooLarge {
		t.Fatalf("fork over the snapshot cap: got %v %+v; want too_large", err, fr.Results)
	}
	res := step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: parent, Action: &aci.Action{Verb: aci.Wait, MS: 10}}}})
	if res.Results[0].Error != nil {
		t.Errorf("the parent after a refused fork: %v; want it stepping", res.Results[0].Error)
	}
	s.WaitEnv(t, parent, `[ -e ~/big ]`)
}

// TestDockerEscapes: the agent's shell (launch_app) in a container tries
// the ways out — the engine's socket, writing outside home and /tmp,
// remounting / read-write, mounting, su, the host's processes, a user
// namespace, a GPU or kvm node — and each is refused (docs/architecture.md,
// "Docker hardening").
func TestDockerEscapes(t *testing.T) {
	s := dockerServer(t, servertest.Options{Pool: 1})
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Actions: []aci.Action{sh(`
t() { if ( eval "$2" ) >/dev/null 2>&1; then echo "escaped: $1"; else echo "held: $1"; fi; }
{
t docker-socket 'test -S /var/run/docker.sock || test -S /run/docker.sock || find / -xdev -type s -name "docker*" | grep -q .'
t write-etc 'echo x > /etc/owned'
t write-usr 'touch /usr/bin/owned'
t write-root 'touch /owned'
t remount-rw 'mount -o remount,rw / && touch /owned'
t mount-tmpfs 'mkdir -p ~/m && mount -t tmpfs x ~/m'
t setuid-su 'su -c id root </dev/null'
t host-procs 'grep -lE "^(dockerd|containerd|envserver|systemd)$" /proc/[0-9]*/comm'
t user-namespace 'unshare -U -r id'
t gpu-kvm 'ls /dev/nvidia* /dev/kvm'
} > ~/escapes.txt; touch ~/escapes-done`)}}}})
	s.WaitEnv(t, env, `[ -e ~/escapes-done ]`)
	c, ok := s.Server.EnvGuest(env)
	if !ok {
		t.Fatal("no guest")
	}
	res, err := c.Exec(context.Background(), wire.ExecArgs{Shell: "cat ~/escapes.txt", TimeoutMS: 10000})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if n := strings.Count(out, "held: "); n != 10 || strings.Contains(out, "escaped") {
		t.Errorf("escape attempts:\n%s\nwant all 10 held", out)
	}
}
