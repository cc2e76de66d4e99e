package configs

import (
	"encoding/json"
	"testing"
)

// TestInstanceDeterministic: the same (family, version, split, seed) is the
// same instance, byte for byte; distinct seeds give distinct instances.
func TestInstanceDeterministic(t *testing.T) {
	ts, err := LoadTasks("")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ts.IDs() {
		task := ts[id]
		a, err := task.Instantiate(SplitTrain, 42)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := task.Instantiate(SplitTrain, 42)
		ja, _ := json.Marshal(a)
		jb, _ := json.Marshal(b)
		if string(ja) != string(jb) {
			t.Errorf("%s: seed 42 drew two different instances", id)
		}
		if !task.Parameterized() {
			continue
		}
		seen := map[string]bool{}
		const n = 200
		for seed := int64(0); seed < n; seed++ {
			in, err := task.Instantiate(SplitTrain, seed)
			if err != nil {
				t.Fatal(err)
			}
			if in.Split != SplitTrain {
				t.Fatalf("%s: train seed %d drew a %s instance", id, seed, in.Split)
			}
			seen[in.Hash] = true
		}
		if len(seen) < n*9/10 {
			t.Errorf("%s: %d seeds drew %d distinct instances; want at least 90%%", id, n, len(seen))
		}
		for seed := int64(0); seed < 50; seed++ {
			in, err := task.Instantiate(SplitTest, seed)
			if err != nil {
				t.Fatal(err)
			}
			if in.Split != SplitTest || seen[in.Hash] {
				t.Fatalf("%s: test seed %d drew a train instance", id, seed)
			}
		}
	}
}
