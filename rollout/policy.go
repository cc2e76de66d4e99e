package rollout

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
)

// Policy starts one Agent per episode.
type Policy interface {
	// Start begins an episode of task; seed is the run matrix's seed.
	Start(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error)
}

// Agent picks each turn's move in one episode.
type Agent interface {
	// Act decides the next step from what the env shows now.
	Act(ctx context.Context, turn Turn) (Decision, error)
}

// Turn is what an agent sees before a step.
type Turn struct {
	Task      api.TaskInfo
	EnvID     string
	EpisodeID string
	Step      int              // 0 for the first step
	Obs       *aci.Observation // the current screen
	Frame     []byte           // Obs's encoded image (nil when the server sent none)
	LastError *aci.Error       // the previous step's info.error, if any
}

// Decision is one step: either typed Actions, or model Text in Dialect for
// the server to parse. Coords, when set, is the step's coordinate space on
// the wire (aci.Coords.Wire). Tokens, when set, are recorded into the
// trajectory.
type Decision struct {
	Actions []aci.Action
	Text    string
	Dialect string
	Coords  any
	Tokens  *api.Tokens
}

// PolicyFunc adapts a function to Policy.
type PolicyFunc func(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error)

// Start calls f.
func (f PolicyFunc) Start(ctx context.Context, task api.TaskInfo, seed int64) (Agent, error) {
	return f(ctx, task, seed)
}

// AgentFunc adapts a function to Agent.
type AgentFunc func(ctx context.Context, turn Turn) (Decision, error)

// Act calls f.
func (f AgentFunc) Act(ctx context.Context, turn Turn) (Decision, error) { return f(ctx, turn) }

// Scripted plays the oracle of each episode's task instance (its
// Solution, drawn from the same family, split and seed as the server's),
// one entry per step. Past the end of the solution it sends done.
type Scripted struct {
	Tasks configs.Tasks
	Split string // the runner's split (default train)
	Wrong bool   // play the instance's first wrong solution instead
}

func (p *Scripted) playsScripts() bool { return true }

// Start implements Policy.
func (p *Scripted) Start(_ context.Context, task api.TaskInfo, seed int64) (Agent, error) {
	t, ok := p.Tasks[task.ID]
	if !ok {
		return nil, fmt.Errorf("scripted: no solution for task %q", task.ID)
	}
	split := p.Split
	if split == "" {
		split = configs.SplitTrain
	}
	in, err := t.Instantiate(split, seed)
	if err != nil {
		return nil, fmt.Errorf("scripted: %w", err)
	}
	if task.Instruction != "" && task.Instruction != in.Instruction && task.Instruction != t.Instruction {
		// The server drew another instance: its definition differs from ours.
		return nil, fmt.Errorf("scripted: task %s seed %d: the server's instance (%q) is not the local definition's (%q)",
			task.ID, seed, task.Instruction, in.Instruction)
	}
	sol := in.Solution
	if p.Wrong {
		sol = nil
		if len(in.Wrong) > 0 {
			sol = in.Wrong[0]
		}
	}
	if len(sol) == 0 {
		return nil, fmt.Errorf("scripted: task %q has no solution", task.ID)
	}
	return AgentFunc(func(_ context.Context, turn Turn) (Decision, error) {
		if turn.Step >= len(sol) {
			return Decision{Actions: []aci.Action{{Verb: aci.Done}}}, nil
		}
		return Decision{Actions: sol[turn.Step]}, nil
	}), nil
}

// Random sends valid random actions inside the screen, for load: moves,
// clicks, scrolls, short typed words and harmless keys. Each episode's
// stream is fixed by its seed. It ends an episode with done with probability
// DoneProb per step (0: never, so episodes run to max_steps).
type Random struct {
	DoneProb float64
}

var randomKeys = []string{"Return", "Tab", "Escape", "BackSpace", "Up", "Down", "Left", "Right"}

// Start implements Policy.
func (p *Random) Start(_ context.Context, task api.TaskInfo, seed int64) (Agent, error) {
	r := rand.New(rand.NewPCG(uint64(seed), hashString(task.ID)))
	return AgentFunc(func(_ context.Context, turn Turn) (Decision, error) {
		w, h := 1024, 768
		if turn.Obs != nil && turn.Obs.Display.W > 0 {
			w, h = turn.Obs.Display.W, turn.Obs.Display.H
		}
		pt := aci.Px(float64(r.IntN(w)), float64(r.IntN(h)))
		if p.DoneProb > 0 && r.Float64() < p.DoneProb {
			return Decision{Actions: []aci.Action{{Verb: aci.Done}}}, nil
		}
		var a aci.Action
		switch r.IntN(6) {
		case 0:
			a = aci.Action{Verb: aci.Move, Target: pt}
		case 1:
			a = aci.Action{Verb: aci.Click, Target: pt}
		case 2:
			a = aci.Action{Verb: aci.DoubleClick, Target: pt}
		case 3:
			a = aci.Action{Verb: aci.Scroll, Target: pt, DY: r.IntN(7) - 3}
			if a.DY == 0 {
				a.DY = 1
			}
		case 4:
			word := make([]byte, 1+r.IntN(8))
			for i := range word {
				word[i] = byte('a' + r.IntN(26))
			}
			a = aci.Action{Verb: aci.TypeText, Text: string(word)}
		default:
			a = aci.Action{Verb: aci.Key, Keys: randomKeys[r.IntN(len(randomKeys))]}
		}
		return Decision{Actions: []aci.Action{a}}, nil
	}), nil
}

func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
