package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// An episode the infrastructure failed is never exported as reward 0: its row
// is flagged drop with a null reward_score, and counted.
func TestExportVerlFlagsInfrastructureFailures(t *testing.T) {
	steps := func() []Step {
		return []Step{
			{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}},
			{Index: 1, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4}},
		}
	}
	var ts []*Trajectory
	for _, r := range []ExitReason{TaskComplete, AgentError, MaxSteps, ScorerError, SandboxDied, SetupError} {
		ts = append(ts, ended(&Trajectory{EpisodeID: string(r), ExitReason: r, NumTurns: 2, Steps: steps()}))
	}
	var buf bytes.Buffer
	st, err := ExportVerl(&buf, ts)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rows != 6 || st.Dropped != 3 {
		t.Errorf("stats %+v; want 6 rows, 3 dropped", st)
	}
	for i, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var row map[string]any
		if err := json.Unmarshal(line, &row); err != nil {
			t.Fatal(err)
		}
		reason := ts[i].ExitReason
		extra := row["extra_fields"].(map[string]any)
		score, has := row["reward_score"]
		if !has {
			t.Errorf("%s: row has no reward_score key", reason)
		}
		if Dropped(reason) {
			if score != nil || extra["drop"] != true {
				t.Errorf("%s: reward_score %v drop %v; want null and true", reason, score, extra["drop"])
			}
		} else if score != 0.0 || extra["drop"] != false {
			t.Errorf("%s: reward_score %v drop %v; want 0 and false", reason, score, extra["drop"])
		}
		for _, k := range []string{"multi_modal_data", "metrics"} {
			if _, ok := row[k]; !ok {
				t.Errorf("%s: row lacks %s", reason, k)
			}
		}
	}
}

// A tokenless step after the token turns (a client's scripted ending) is
// left out of the row; one between token turns still makes the episode
// untrainable.
func TestVerlRowTokenlessTail(t *testing.T) {
	tail := ended(&Trajectory{EpisodeID: "t", ExitReason: TaskComplete, Reward: 0.5, InitFrame: "i", Steps: []Step{
		{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}, ObsFrame: "a"},
		{Index: 1, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4}, ObsFrame: "b"},
		{Index: 2, ObsFrame: "c"},
	}})
	row, err := VerlRow(tail)
	if err != nil {
		t.Fatal(err)
	}
	if row.ExtraFields[FieldRowTurns] != 2 || *row.RewardScore != 0.5 || row.Metrics.EnvSteps != 3 ||
		len(row.MultiModalData.Images) != 2 {
		t.Errorf("row turns %v reward %v metrics %+v images %v; want 2 turns, 0.5, 3 steps, [i a]",
			row.ExtraFields[FieldRowTurns], *row.RewardScore, row.Metrics, row.MultiModalData.Images)
	}
	middle := ended(&Trajectory{EpisodeID: "m", Steps: []Step{
		{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}},
		{Index: 1},
		{Index: 2, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4}},
	}})
	if _, err := VerlRow(middle); !errors.Is(err, ErrNoTokens) {
		t.Errorf("VerlRow(tokenless middle step) = %v; want ErrNoTokens", err)
	}
}
