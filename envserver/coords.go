package envserver

import (
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
)

// stepCoords resolves the coordinate space of a step's actions and text:
// the step's own coords, else the env's default (set at reset), else the
// dialect's default for model text, else screen. A malformed coords value
// fails the request (bad_request): it is the trainer's setting, not the
// model's output.
func stepCoords(st *api.StepEnv, envDefault *aci.Coords, dialectDefault *aci.Coords) (aci.Coords, error) {
	if st.Coords != nil {
		c, err := aci.ParseCoords(st.Coords)
		if err != nil {
			return aci.Coords{}, aci.Errorf(aci.CodeBadRequest, "step coords: %s", aci.AsError(err).Message)
		}
		return c, nil
	}
	if envDefault != nil {
		return *envDefault, nil
	}
	if dialectDefault != nil {
		return *dialectDefault, nil
	}
	return aci.Coords{Space: aci.CoordsScreen}, nil
}

// mapActions rewrites every point of acts from space c onto screen pixels
// through d, the display descriptor of the frame the env last delivered. The
// first point that cannot be mapped (no descriptor, outside the space) is an
// invalid_action for that action; results then say which one.
func mapActions(acts []aci.Action, c aci.Coords, d *aci.Display) (failed int, err error) {
	for i := range acts {
		if err := c.MapAction(&acts[i], d); err != nil {
			return i, err
		}
	}
	return -1, nil
}

// newResults returns one result per action, each skipped until it runs.
func newResults(n int) []aci.ActionResult {
	rs := make([]aci.ActionResult, n)
	for i := range rs {
		rs[i].Status = aci.StatusSkipped
	}
	return rs
}

// failResult marks action i as failed with err.
func failResult(rs []aci.ActionResult, i int, err error) {
	if i < 0 || i >= len(rs) {
		return
	}
	e := aci.AsError(err)
	rs[i] = aci.ActionResult{Status: string(e.Code), Error: e}
}

// okResult records what action a returned.
func okResult(a aci.Verb, res *wire.ActResult) aci.ActionResult {
	r := aci.ActionResult{Status: aci.StatusOK}
	if res == nil {
		return r
	}
	switch a {
	case aci.ClipboardGet:
		text := res.Clipboard
		r.Text = &text
	case aci.LaunchApp:
		r.PID, r.WindowID = res.PID, res.WindowID
	case aci.ActivateWindow:
		r.WindowID = res.WindowID
	case aci.ListWindows:
		r.Windows = res.Windows
		if r.Windows == nil {
			r.Windows = []aci.Window{}
		}
	}
	return r
}

// episodeKnobs reads a reset's per-episode settings: the env's default
// coordinate space and the step budget (the task's, lowered by the reset and
// capped by the server's limit).
func (s *Server) episodeKnobs(re *api.ResetEnv, task *configs.Task) (*aci.Coords, int, error) {
	var coords *aci.Coords
	if re.Coords != nil {
		c, err := aci.ParseCoords(re.Coords)
		if err != nil {
			return nil, 0, aci.Errorf(aci.CodeBadRequest, "reset coords: %s", aci.AsError(err).Message)
		}
		coords = &c
	}
	if re.MaxSteps < 0 {
		return nil, 0, aci.Errorf(aci.CodeBadRequest, "reset max_steps %d: must be positive (0 keeps the task's)", re.MaxSteps)
	}
	n := task.MaxSteps
	if re.MaxSteps > 0 {
		n = min(n, re.MaxSteps)
	}
	if s.cfg.MaxSteps > 0 {
		n = min(n, s.cfg.MaxSteps)
	}
	return coords, n, nil
}

// actedBeforeObserve reports whether the step's own capture must settle as
// after an action although no action carried it: some input ran, and then
// the step ended on screenshot, done or fail (which capture separately) or
// on a refused action.
func actedBeforeObserve(acts []aci.Action, results []aci.ActionResult) bool {
	for i, a := range acts {
		switch a.Verb {
		case aci.Screenshot, aci.Done, aci.Fail:
		default:
			if i < len(results) && results[i].Status == aci.StatusOK {
				return true
			}
		}
	}
	return false
}
