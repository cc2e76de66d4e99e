package dialect

import (
	"math"
	"strings"

	"github.com/shinken-rl/shinken/aci"
)

type pyArgs struct {
	args map[string]any
	src  string
}

func (a *pyArgs) num(name string, def float64) (float64, error) {
	v, ok := a.args[name]
	if !ok || v == nil {
		if def < 0 {
			return 0, dialectErr(a.src, "missing argument %s", name)
		}
		return def, nil
	}
	f, ok := v.(float64)
	if !ok {
		return 0, dialectErr(a.src, "argument %s must be a number", name)
	}
	return f, nil
}

// point reads x, y (or a tuple in x); nil when neither is given.
func (a *pyArgs) point() (*aci.Target, error) {
	if t, err := a.element(); t != nil || err != nil { // element.go
		return t, err
	}
	x, y := a.args["x"], a.args["y"]
	if m, ok := x.(markLabel); ok {
		if y != nil {
			return nil, dialectErr(a.src, "a Set-of-Mark label stands for x and y: give it alone")
		}
		return aci.MarkRef(string(m)), nil
	}
	if seq, ok := x.([]any); ok {
		if y != nil || len(seq) != 2 {
			return nil, dialectErr(a.src, "want x, y or one (x, y) pair")
		}
		x, y = seq[0], seq[1]
	}
	if x == nil && y == nil {
		return nil, nil
	}
	if _, isStr := x.(string); isStr {
		return nil, dialectErr(a.src, "image locations are not supported; give x, y")
	}
	fx, okx := x.(float64)
	fy, oky := y.(float64)
	if !okx || !oky {
		return nil, dialectErr(a.src, "want numeric x and y")
	}
	return aci.Px(fx, fy), nil
}

func (a *pyArgs) durationMS() (int, error) {
	d, err := a.num("duration", 0)
	if err != nil {
		return 0, err
	}
	if d < 0 || d > 60 {
		return 0, dialectErr(a.src, "duration %vs is out of range", d)
	}
	return int(math.Round(d * 1000)), nil
}

func (a *pyArgs) pointAction(v aci.Verb, needPoint bool) ([]aci.Action, error) {
	t, err := a.point()
	if err != nil {
		return nil, err
	}
	if t == nil && needPoint {
		return nil, dialectErr(a.src, "%s needs x, y", v)
	}
	act := aci.Action{Verb: v, Target: t}
	if v == aci.Move {
		if act.DurationMS, err = a.durationMS(); err != nil {
			return nil, err
		}
	}
	if b, ok := a.args["button"].(string); ok && b != "left" {
		act.Button = strings.ToLower(b)
	}
	return []aci.Action{act}, nil
}

func (a *pyArgs) drag() ([]aci.Action, error) {
	t, err := a.point()
	if err != nil {
		return nil, err
	}
	if t == nil {
		return nil, dialectErr(a.src, "dragTo needs x, y")
	}
	act := aci.Action{Verb: aci.Drag, To: t}
	if act.DurationMS, err = a.durationMS(); err != nil {
		return nil, err
	}
	if b, ok := a.args["button"].(string); ok && b != "left" {
		act.Button = strings.ToLower(b)
	}
	if v, ok := a.args["mouseDownUp"]; ok && v != true {
		return nil, dialectErr(a.src, "dragTo(mouseDownUp=False) is not supported")
	}
	return []aci.Action{act}, nil
}

func (a *pyArgs) scroll(horizontal bool) ([]aci.Action, error) {
	n, err := a.num("clicks", -1)
	if err != nil {
		return nil, err
	}
	if n != math.Trunc(n) || n == 0 || math.Abs(n) > 1000 {
		return nil, dialectErr(a.src, "scroll clicks must be a non-zero whole number, got %v", n)
	}
	t, err := a.point()
	if err != nil {
		return nil, err
	}
	act := aci.Action{Verb: aci.Scroll, Target: t}
	if horizontal {
		act.DX = int(n)
	} else {
		act.DY = -int(n) // pyautogui: positive scrolls up
	}
	return []aci.Action{act}, nil
}
