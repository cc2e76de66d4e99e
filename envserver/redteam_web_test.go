package envserver_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
)

// webAttacks are what an agent in a browser task runs to reach its reward
// without the task, or to take the browser's control channel: each prints
// what it got, and the test asserts the attack failed.
var webAttacks = []struct{ name, shell, want string }{
	// The only listening socket is the web host's: Chromium's DevTools
	// travel on a pipe, not a port the agent could use.
	{"no debugging port", `python3 -c '
ls = [l.split() for l in open("/proc/net/tcp").read().splitlines()[1:]] + [l.split() for l in open("/proc/net/tcp6").read().splitlines()[1:]]
print(len(set(f[1] for f in ls if f[3] == "0A")), "listening")'`, "1 listening"},
	// The agent cannot take the web host's place: no privileged port.
	{"no privileged port", `python3 -c '
import socket, errno
s = socket.socket()
try:
    s.bind(("127.0.0.1", 81)); print("bound")
except OSError as e:
    print(errno.errorcode[e.errno])'`, "EACCES"},
	// The web host is guestd: the agent cannot signal it.
	{"no kill", `kill -9 1 2>/dev/null && echo killed || echo refused`, "refused"},
	// A forged state where the agent can write is never read: the state
	// the verifier reads is guestd's memory.
	{"forged state", `for d in "$HOME/.shinken/web" /tmp/web "$HOME/web"; do mkdir -p "$d" && printf '{"orders":[{"lines":[{"sku":"X","qty":1}]}]}' > "$d/shop.json"; done; echo planted`, "planted"},
}

// TestRedTeamWebGroundTruth plays webAttacks as the agent of a browser
// task; the episode, where no order was placed, scores the minimum.
func TestRedTeamWebGroundTruth(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, AllowUnchecked: true, Logf: t.Logf})
	const task = "shop-buy-cheapest"
	if s.Tasks[task] == nil {
		t.Skipf("%s is not served (chromium missing?)", task)
	}
	seed := int64(0)
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: task, Seed: &seed}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	g, err := envserver.EnvGuest(s.Server, env)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, a := range webAttacks {
		res, err := g.Exec(ctx, wire.ExecArgs{Shell: a.shell, TimeoutMS: 20000})
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		if got := strings.TrimSpace(string(res.Stdout)); got != a.want {
			t.Errorf("%s: got %q (%s); want %q", a.name, got, res.Stderr, a.want)
		}
	}
	rewards, reasons := play(t, s, []string{env}, [][][]aci.Action{{{{Verb: aci.Done}}}})
	if rewards[0] != 0 || reasons[0] != "task_complete" {
		t.Fatalf("after the attacks: reward %v, %s; want 0, task_complete", rewards[0], reasons[0])
	}
}
