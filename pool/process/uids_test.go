package process

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
	"github.com/shinken-rl/shinken/pool/pooltest"
)

// TestProvidersOnOneHostDoNotShareUIDs boots one sandbox from each of
// several providers with different roots (as several servers on one host,
// or several servers in one test binary, have): each desktop gets its own
// uid, so one sandbox's processes never count against another's
// RLIMIT_NPROC. With a uid derived from a display number counted per root,
// every one of them ran as the same uid and most boots failed with
// "resource temporarily unavailable".
func TestProvidersOnOneHostDoNotShareUIDs(t *testing.T) {
	if os.Geteuid() != 0 {
		pooltest.SkipUnless(t, pooltest.RequireNamespaces, "sandbox uids are assigned only when running as root")
	}
	const n = 6
	provs := make([]*Provider, n)
	for i := range provs {
		provs[i] = newTestProvider(t, Options{NProc: 64})
		if !provs[i].confined {
			pooltest.SkipUnless(t, pooltest.RequireNamespaces, "unconfined host: sandboxes keep the caller's uid")
		}
	}
	ctx := context.Background()
	sbs := make([]*pool.Sandbox, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, p := range provs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sbs[i], errs[i] = p.Create(ctx, pool.Spec{})
		}()
	}
	wg.Wait()
	seen := map[string]int{}
	for i, err := range errs {
		if err != nil {
			t.Errorf("provider %d: boot: %v", i, err)
			continue
		}
		// The desktop's window manager runs as a uid of the sandbox's own
		// claim (guestd, its init, stays root where the host allows it).
		wm := childrenNamed(provs[i].InitPID(sbs[i].ID), "openbox")
		if len(wm) != 1 {
			t.Errorf("provider %d: window managers %v; want one", i, wm)
			continue
		}
		uid := procUID(t, wm[0])
		if uid == "0" {
			t.Errorf("provider %d: the desktop runs as root", i)
		}
		if j, dup := seen[uid]; dup {
			t.Errorf("providers %d and %d: both sandboxes run as uid %s", j, i, uid)
		}
		seen[uid] = i
	}
}

// procUID reads the real uid of a process.
func procUID(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("pid %d: no Uid line", pid)
	return ""
}

// TestAgentAndScorerUIDsNeverCollide boots sandboxes one after another from
// a range of three uid claims, more boots than it has claims, so claims wrap
// around, and reads in each the uid its agent, its verifier and its window
// manager run as: no uid ever serves two of those roles. (A verifier's uid
// derived from the display number once fell inside the range agents' uids
// are handed out from, so after enough boots an agent ran as another
// sandbox's verifier.)
func TestAgentAndScorerUIDsNeverCollide(t *testing.T) {
	if os.Geteuid() != 0 {
		pooltest.SkipUnless(t, pooltest.RequireNamespaces, "sandbox uids are assigned only when running as root")
	}
	const base, claims = 310000, 3
	p := newTestProvider(t, Options{UIDBase: base, UIDs: uidsPerSandbox * claims, UIDLockDir: t.TempDir()})
	if !p.confined {
		pooltest.SkipUnless(t, pooltest.RequireNamespaces, "unconfined host: sandboxes keep the caller's uid")
	}
	role := map[string]string{} // uid -> the role it served
	for i := 0; i < claims+2; i++ {
		sb := pooltest.Create(t, p)
		c := pooltest.Dial(t, sb)
		agent := strings.TrimSpace(pooltest.MustSh(t, c, "id -u"))
		res, err := c.Score(context.Background(), wire.ScoreArgs{Shell: "id -u"})
		if err != nil {
			t.Fatalf("boot %d: score: %v", i, err)
		}
		scorer := strings.TrimSpace(string(res.Stdout))
		wms := childrenNamed(p.InitPID(sb.ID), "openbox")
		if len(wms) != 1 {
			t.Fatalf("boot %d: window managers %v; want one", i, wms)
		}
		wm := procUID(t, wms[0])
		t.Logf("boot %d: agent uid %s, verifier uid %s, window manager uid %s", i, agent, scorer, wm)
		for r, u := range map[string]string{"agent": agent, "verifier": scorer, "window manager": wm} {
			if n, err := strconv.Atoi(u); err != nil || n < base || n >= base+uidsPerSandbox*claims {
				t.Errorf("boot %d: %s uid %s outside the claimed range [%d, %d)", i, r, u, base, base+uidsPerSandbox*claims)
			}
			if prev, ok := role[u]; ok && prev != r {
				t.Fatalf("uid %s ran a %s in one sandbox and a %s in another", u, prev, r)
			}
			role[u] = r
		}
		if err := p.Destroy(context.Background(), sb.ID); err != nil {
			t.Fatalf("destroy: %v", err)
		}
	}
	if n := len(role); n != uidsPerSandbox*claims {
		t.Errorf("%d distinct uids over %d boots; want all %d of the range used", n, claims+2, uidsPerSandbox*claims)
	}
}
