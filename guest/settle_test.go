package guest_test

import (
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/guest/wire"
)

var settleTest = &aci.Settle{FirstMS: 150, QuietMS: 40, MaxMS: 1500}

func TestSettleScratch(t *testing.T) {
	d := startDesk(t, testW, testH, "")
	r := recorder(t, d, 0, 0, testW, testH)
	if !d.cl.Welcome().Damage {
		t.Fatal("no damage")
	}
	ctx := ctxT(t)
	obs := &wire.ObserveArgs{Observe: aci.Observe{Format: aci.FormatRaw, Settle: settleTest}}
	res, err := d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(5, 5)}, Observe: obs})
	t.Logf("move1 %+v %v", res.Obs.Settle, err)
	obs.IfNoneMatch = []string{res.Obs.Hash}
	res, err = d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(50, 50)}, Observe: obs})
	t.Logf("move2 %+v nm=%v %v", res.Obs.Settle, res.Obs.NotModified, err)
	t0 := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		err := r.Fill(10, 10, 50, 50, 0xff0000)
		t.Logf("filled at %v %v", time.Since(t0), err)
	}()
	res, err = d.cl.Act(ctx, wire.ActArgs{Action: aci.Action{Verb: aci.Move, Target: aci.Px(60, 50)}, Observe: obs})
	t.Logf("act done at %v", time.Since(t0))
	t.Logf("fill %+v nm=%v %v", res.Obs.Settle, res.Obs.NotModified, err)
}
