package rollout

import (
	"fmt"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
)

// Observation tracks a policy reads (rollout --observe).
const (
	ObserveFrame = "frame" // the screenshot only (default)
	ObserveA11y  = "a11y"  // the accessibility tree's text only
	ObserveBoth  = "both"  // the screenshot and the tree's text
)

// CheckObserve validates an --observe value.
func CheckObserve(s string) error {
	switch s {
	case "", ObserveFrame, ObserveA11y, ObserveBoth:
		return nil
	}
	return fmt.Errorf("unknown observe %q (want frame, a11y or both)", s)
}

// ObserveTree is the observe.a11y mode a track needs ("" for none).
func ObserveTree(track string) string {
	if track == ObserveA11y || track == ObserveBoth {
		return aci.A11yFull
	}
	return ""
}

// treePart is the text part that feeds a turn's accessibility tree to a
// model, with how to act on its elements in the dialect.
func treePart(dialect string, obs *aci.Observation) (contentPart, bool) {
	if obs == nil {
		return contentPart{}, false
	}
	if obs.A11y != nil && obs.A11y.Error != nil {
		return contentPart{Type: "text", Text: "Accessibility tree unavailable: " + obs.A11y.Error.Message}, true
	}
	if obs.TreeText == "" {
		return contentPart{}, false
	}
	how := `pyautogui.click(element="e12")`
	switch dialect {
	case "json":
		how = `{"action": "click", "ref": "e12"}`
	case "xml":
		how = `<invoke name="click"><parameter name="ref">e12</parameter></invoke>`
	}
	return contentPart{Type: "text", Text: "Accessibility tree of the focused window (target an element by its id, e.g. " +
		how + "):\n" + obs.TreeText}, true
}

// treeNeeder is a Policy that needs the accessibility tree observed for
// some tasks beyond what the run asks for: the scripted policy replaying
// solutions that act on element refs, which the tree's observations mint.
type treeNeeder interface {
	NeedsTree(task string) bool
}

// NeedsTree implements treeNeeder: tasks marked a11y replay element refs.
func (p *Scripted) NeedsTree(task string) bool {
	t, ok := p.Tasks[task]
	return ok && t.A11y
}

// observe is the observe setting of task's requests.
func (r *runner) observe(task string) *api.Observe {
	n, tree := r.cfg.Policy.(treeNeeder)
	tree = tree && n.NeedsTree(task) && (r.cfg.Observe == nil || r.cfg.Observe.A11y == "")
	sp, script := r.cfg.Policy.(scriptPlayer)
	script = script && sp.playsScripts() && (r.cfg.Observe == nil || r.cfg.Observe.Settle == nil)
	if !tree && !script {
		return r.cfg.Observe
	}
	o := api.Observe{}
	if r.cfg.Observe != nil {
		o = *r.cfg.Observe
	}
	if tree {
		o.A11y = aci.A11yFull
	}
	if script {
		settle := configs.ScriptSettle
		o.Settle = &settle
	}
	return &o
}

// scriptPlayer is a policy that may play fixed scripts (Scripted, or a
// wrapper of one that forwards this): one that does cannot look at the
// screen, so unless the config sets a settle its steps settle as
// configs.ScriptSettle says.
type scriptPlayer interface{ playsScripts() bool }
