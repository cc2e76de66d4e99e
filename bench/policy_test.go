package bench

import (
	"math/rand/v2"
	"testing"

	"github.com/shinken-rl/shinken/configs"
)

func TestRandomPolicyStaysOnScreen(t *testing.T) {
	p := &Random{W: 1280, H: 800, Rand: rand.New(rand.NewPCG(1, 2))}
	verbs := map[string]bool{}
	for i := 0; i < 2000; i++ {
		acts := p.Next()
		if len(acts) != 1 {
			t.Fatalf("got %d actions; want 1", len(acts))
		}
		a := acts[0]
		verbs[string(a.Verb)] = true
		if !a.Verb.Known() {
			t.Fatalf("unknown verb %q", a.Verb)
		}
		if pt, ok := a.Point(); ok && (pt.X < 0 || pt.X >= 1280 || pt.Y < 0 || pt.Y >= 800) {
			t.Fatalf("%s at (%v,%v): off a 1280x800 screen", a.Verb, pt.X, pt.Y)
		}
		if a.Verb == "scroll" && a.DY == 0 {
			t.Fatalf("scroll by 0")
		}
	}
	if len(verbs) != 6 {
		t.Errorf("got verbs %v; want all 6 kinds", verbs)
	}
}

func TestScriptedReplaysSolution(t *testing.T) {
	tasks, err := configs.LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	task := tasks[defaultTask]
	p := &Scripted{}
	for round := 0; round < 2; round++ {
		p.Begin(task)
		for i, want := range task.Solution {
			got := p.Next()
			if len(got) != len(want) || got[0].Verb != want[0].Verb {
				t.Fatalf("round %d step %d: got %v; want %v", round, i, got, want)
			}
		}
		if got := p.Next(); got != nil {
			t.Fatalf("after the solution: got %v; want nil", got)
		}
	}
}
