package bench

import (
	"math/rand/v2"
	"strings"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
)

// Policy picks the actions of an episode's next step. Next returns nil when
// the policy has nothing more to do (the episode should have ended).
type Policy interface {
	Name() string
	// Begin starts a new episode of task.
	Begin(task *configs.Task)
	Next() []aci.Action
}

// Scripted replays the task's reference solution step by step.
type Scripted struct {
	sol [][]aci.Action
	i   int
}

// Name implements Policy.
func (s *Scripted) Name() string { return "scripted" }

// Begin implements Policy.
func (s *Scripted) Begin(task *configs.Task) { s.sol, s.i = task.Solution, 0 }

// Next implements Policy.
func (s *Scripted) Next() []aci.Action {
	if s.i >= len(s.sol) {
		return nil
	}
	s.i++
	return s.sol[s.i-1]
}

// Random acts uniformly at random over pointer and keyboard verbs on a
// W x H screen until the task's step budget truncates the episode. It types
// only letters and presses only editing and navigation keys, so it cannot
// type a destructive command by chance.
type Random struct {
	W, H int
	Rand *rand.Rand
}

// Name implements Policy.
func (r *Random) Name() string { return "random" }

// Begin implements Policy.
func (r *Random) Begin(*configs.Task) {}

var randomKeys = []string{"Return", "BackSpace", "Tab", "Escape", "Left", "Right", "Up", "Down", "ctrl+c"}

// Next implements Policy.
func (r *Random) Next() []aci.Action {
	pt := aci.Px(float64(r.Rand.IntN(r.W)), float64(r.Rand.IntN(r.H)))
	switch r.Rand.IntN(6) {
	case 0:
		return []aci.Action{{Verb: aci.Click, Target: pt}}
	case 1:
		return []aci.Action{{Verb: aci.DoubleClick, Target: pt}}
	case 2:
		return []aci.Action{{Verb: aci.Move, Target: pt}}
	case 3:
		dy := 1 + r.Rand.IntN(3)
		if r.Rand.IntN(2) == 0 {
			dy = -dy
		}
		return []aci.Action{{Verb: aci.Scroll, Target: pt, DY: dy}}
	case 4:
		var sb strings.Builder
		for n := 1 + r.Rand.IntN(8); n > 0; n-- {
			sb.WriteByte(byte('a' + r.Rand.IntN(26)))
		}
		return []aci.Action{{Verb: aci.TypeText, Text: sb.String()}}
	default:
		return []aci.Action{{Verb: aci.Key, Keys: randomKeys[r.Rand.IntN(len(randomKeys))]}}
	}
}
