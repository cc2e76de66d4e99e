package process

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest/client"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/pool"
)

// BenchmarkScore measures what reward integrity costs per verdict in a real
// sandbox with a desktop and a few of the agent's processes: the shipped
// xterm-hello-file check run by plain exec as the agent (no freeze, no
// identity change: the old way) against score (every agent process stopped,
// the verifier run as the scoring uid with a fresh HOME). freeze_us and
// frozen are the freeze's share and reach.
//
//	go test -run '^$' -bench BenchmarkScore -benchtime 50x ./pool/process/
func BenchmarkScore(b *testing.B) {
	p := newTestProvider(b, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const check = `if [ "$(cat "$HOME/hello.txt" 2>/dev/null)" = 'hello shinken' ]; then echo 1; else echo 0; fi`
	scored := strings.ReplaceAll(check, "$HOME", "$AGENT_HOME")
	for _, mode := range []string{"exec", "score"} {
		b.Run(mode, func(b *testing.B) {
			// A fresh sandbox each: score leaves the agent's processes stopped.
			sb, err := p.Create(ctx, pool.Spec{})
			if err != nil {
				b.Fatal(err)
			}
			defer p.Destroy(context.WithoutCancel(ctx), sb.ID)
			c, err := client.Dial(ctx, sb.GuestNetwork, sb.GuestAddr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			// The agent's session: a few idle processes like a terminal's.
			if _, err := c.Exec(ctx, wire.ExecArgs{Shell: `for i in 1 2 3 4 5 6 7 8; do sleep 600 & done`, TimeoutMS: 5000}); err != nil {
				b.Fatal(err)
			}
			var freezeUS, frozen int64
			b.ResetTimer()
			for range b.N {
				if mode == "exec" {
					res, err := c.Exec(ctx, wire.ExecArgs{Shell: check, TimeoutMS: 5000})
					if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" {
						b.Fatalf("exec: %v %+v", err, res)
					}
					continue
				}
				res, err := c.Score(ctx, wire.ScoreArgs{Shell: scored, TimeoutMS: 5000})
				if err != nil || strings.TrimSpace(string(res.Stdout)) != "0" || !res.Isolated {
					b.Fatalf("score: %v %+v", err, res)
				}
				freezeUS += res.FreezeUS
				frozen += int64(res.Frozen)
			}
			if mode == "score" {
				b.ReportMetric(float64(freezeUS)/float64(b.N), "freeze_us/op")
				b.ReportMetric(float64(frozen)/float64(b.N), "frozen/op")
			}
		})
	}
}
