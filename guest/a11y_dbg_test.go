package guest_test

import (
	"testing"

	"github.com/shinken-rl/shinken/aci"
)

func TestA11yDbg(t *testing.T) {
	d := a11yDesk(t)
	res := act(t, d, aci.Action{Verb: aci.LaunchApp, App: "pcmanfm", Args: []string{"."}})
	t.Logf("%+v", res)
	ws := act(t, d, aci.Action{Verb: aci.ListWindows})
	t.Logf("%+v", ws.Windows)
}
