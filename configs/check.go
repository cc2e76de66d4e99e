package configs

import (
	"encoding/json"
	"fmt"

	"github.com/zeebo/xxh3"
)

// StaticSeeds is how many seeds the static check draws per family.
const StaticSeeds = 200

// CheckFile is the check record's name in a task directory: the families
// the task checker passed, at the definition it checked (`envserver tasks
// check --record`). A server serves a parameterized family only when the
// record holds its current definition (docs/tasks.md, "The task checker").
const CheckFile = "checked.json"

// CheckRecord is a task directory's check record, by family id.
type CheckRecord map[string]Checked

// Checked is one family's passing check.
type Checked struct {
	Version int    `json:"version"`
	Def     string `json:"def"`   // DefHash at the check
	Seeds   int    `json:"seeds"` // train seeds 0..Seeds-1 passed
}

// Passed reports whether the record holds t's current definition.
func (r CheckRecord) Passed(t *Task) bool {
	c, ok := r[t.ID]
	return ok && c.Def == t.DefHash()
}

// Admit splits tasks into those a server may serve and the reasons the
// others are refused: a family that draws from the seed must hold a
// passing check record of its definition (the checker ran the static
// check too). allowUnchecked serves
// them all, reasons and all.
func Admit(ts Tasks, rec CheckRecord, allowUnchecked bool) (Tasks, map[string]string) {
	ok, refused := Tasks{}, map[string]string{}
	for id, t := range ts {
		var why string
		switch {
		case t.Parameterized() && rec.Passed(t):
			// The checker ran the static check too, on this definition.
		case t.Parameterized() && !allowUnchecked:
			why = "no passing check of this definition in " + CheckFile + " (run envserver tasks check --record)"
		case t.Parameterized():
			// Served unchecked: the checker runs the static check itself.
			why = "no passing check of this definition in " + CheckFile
		}
		// A task that draws nothing is its one instance, rendered when it
		// loaded (Validate); it may come without an oracle.
		if why != "" {
			refused[id] = why
			if !allowUnchecked {
				continue
			}
		}
		ok[id] = t
	}
	return ok, refused
}

// DefHash identifies a family's definition: the check record of a family
// holds the hash it was checked at, and a changed definition needs a new
// check.
func (t *Task) DefHash() string {
	b, _ := json.Marshal(t)
	h := xxh3.Hash128(b).Bytes()
	return fmt.Sprintf("%x", h[:12])
}

// CheckStatic checks what needs no sandbox (docs/tasks.md, "The task
// checker"): n train seeds each instantiate, twice alike; at least 90% of
// them are distinct instances; the test split is not empty; every instance
// has an oracle within the step budget; the expectations depend on the seed
// unless the family says they do not. It returns the problems found.
func (t *Task) CheckStatic(n int) []string {
	if !t.Parameterized() {
		n = 1 // every seed is the one instance
	}
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	distinct, expects := map[string]bool{}, map[string]bool{}
	for seed := int64(0); seed < int64(n); seed++ {
		a, err := t.Instantiate(SplitTrain, seed)
		if err != nil {
			bad("seed %d: %v", seed, err)
			return probs
		}
		b, _ := t.Instantiate(SplitTrain, seed)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			bad("seed %d drew two different instances", seed)
		}
		if len(a.Solution) == 0 || len(a.Solution) > a.MaxSteps {
			bad("seed %d: the oracle takes %d steps (budget %d)", seed, len(a.Solution), a.MaxSteps)
			return probs
		}
		distinct[a.Hash] = true
		e, _ := json.Marshal(a.Expect)
		expects[string(e)] = true
	}
	if !t.Parameterized() {
		return probs
	}
	if len(distinct) < n*9/10 {
		bad("%d seeds drew %d distinct instances; want at least 90%%", n, len(distinct))
	}
	if !t.SeedFree && len(expects) < 2 {
		bad("every seed expects the same answer: mark the family seed_free or make it depend on the seed")
	}
	if t.TestShare() > 0 {
		if _, err := t.Instantiate(SplitTest, 0); err != nil {
			bad("test split: %v", err)
		}
	}
	return probs
}

// Distinct counts the distinct instances among train seeds 0..n-1.
func (t *Task) Distinct(n int) (int, error) {
	seen := map[string]bool{}
	for seed := int64(0); seed < int64(n); seed++ {
		in, err := t.Instantiate(SplitTrain, seed)
		if err != nil {
			return 0, err
		}
		seen[in.Hash] = true
	}
	return len(seen), nil
}
