package guest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/internal/procstat"
)

func TestExec(t *testing.T) {
	d := startDesk(t, 64, 64, "")
	ctx := ctxT(t)
	res, err := d.cl.Exec(ctx, wire.ExecArgs{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == nil || *res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("got exit %v out %q err %q; want 3, out, err", res.ExitCode, res.Stdout, res.Stderr)
	}
	res, err = d.cl.Exec(ctx, wire.ExecArgs{Argv: []string{"cat"}, Stdin: []byte("piped")})
	if err != nil || string(res.Stdout) != "piped" {
		t.Errorf("stdin: got %q, %v; want piped", res.Stdout, err)
	}
	res, err = d.cl.Exec(ctx, wire.ExecArgs{Shell: "echo $FOO $DISPLAY; pwd", Env: []string{"FOO=bar"}, Cwd: "/"})
	if err != nil || string(res.Stdout) != "bar "+d.sess.Display()+"\n/\n" {
		t.Errorf("shell/env/cwd: got %q, %v", res.Stdout, err)
	}
	res, err = d.cl.Exec(ctx, wire.ExecArgs{Shell: "head -c 300000 /dev/zero"})
	if err != nil || len(res.Stdout) != wire.ExecOutputCap || !res.StdoutTruncated || res.StderrTruncated {
		t.Errorf("truncation: got %d bytes truncated=%v, %v; want %d truncated", len(res.Stdout), res.StdoutTruncated, err, wire.ExecOutputCap)
	}
	if _, err := d.cl.Exec(ctx, wire.ExecArgs{Argv: []string{"/no/such/binary"}}); aci.CodeOf(err) != aci.CodeNotFound {
		t.Errorf("missing binary: got %v; want not_found", err)
	}
	if _, err := d.cl.Exec(ctx, wire.ExecArgs{Argv: []string{"true"}, Shell: "true"}); aci.CodeOf(err) != aci.CodeBadRequest {
		t.Errorf("argv+shell: got %v; want bad_request", err)
	}
	var chunks []wire.ExecChunk
	res, err = d.cl.ExecStream(ctx, wire.ExecArgs{Shell: "for i in 1 2 3; do echo line$i; sleep 0.05; done"}, func(c wire.ExecChunk) { chunks = append(chunks, c) })
	if err != nil || res.ExitCode == nil || *res.ExitCode != 0 {
		t.Fatalf("stream: got %+v, %v", res, err)
	}
	var all string
	for i, c := range chunks {
		if c.Seq != i {
			t.Errorf("chunk %d has seq %d", i, c.Seq)
		}
		all += string(c.Data)
	}
	if all != "line1\nline2\nline3\n" || len(chunks) < 2 {
		t.Errorf("stream got %q in %d chunks; want 3 lines in several chunks", all, len(chunks))
	}
	dst := filepath.Join(t.TempDir(), "a", "b", "f.txt")
	if err := d.cl.PutFile(ctx, wire.PutFileArgs{Path: dst, Data: []byte("hi"), Mode: 0o600}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != "hi" {
		t.Errorf("put_file: got %q, %v", b, err)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Errorf("put_file mode %v; want 0600", fi.Mode().Perm())
	}
}

func TestExecTimeoutKillsGroup(t *testing.T) {
	d := startDesk(t, 64, 64, "")
	pidFile := filepath.Join(t.TempDir(), "bg.pid")
	start := time.Now()
	res, err := d.cl.Exec(ctxT(t), wire.ExecArgs{Shell: "sleep 60 & echo $! > " + pidFile + "; sleep 60", TimeoutMS: 300})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != nil {
		t.Errorf("got timed_out=%v exit=%v; want timed_out with a null exit code", res.TimedOut, res.ExitCode)
	}
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("exec took %v after a 300 ms timeout", el)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for _, c := range strings.TrimSpace(string(b)) {
		pid = pid*10 + int(c-'0')
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := procstat.Read(pid)
		if err != nil || st.State == 'Z' {
			break // gone, or a zombie waiting for its reaper
		}
		if time.Now().After(deadline) {
			t.Fatalf("background child %d still running after the group was killed", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
