package trajectory

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestResolvePairs(t *testing.T) {
	// precedence is the documented order, highest first.
	order := []ExitReason{SandboxDied, SetupError, AgentError, ScorerError, MaxSteps, TaskComplete}
	for i, a := range order {
		if got := Resolve(a); got != a {
			t.Errorf("Resolve(%s) = %s; want %s", a, got, a)
		}
		for j, b := range order {
			want := a
			if j < i {
				want = b
			}
			if got := Resolve(a, b); got != want {
				t.Errorf("Resolve(%s, %s) = %s; want %s", a, b, got, want)
			}
			if got := Resolve(b, a); got != want {
				t.Errorf("Resolve(%s, %s) = %s; want %s", b, a, got, want)
			}
			if got := Resolve("", a, "", b); got != want {
				t.Errorf("Resolve(\"\", %s, \"\", %s) = %s; want %s", a, b, got, want)
			}
		}
		if got := Resolve(a, "mystery"); got != a {
			t.Errorf("Resolve(%s, mystery) = %s; want %s (unknown ranks last)", a, got, a)
		}
	}
	if got := Resolve(); got != "" {
		t.Errorf("Resolve() = %q; want empty", got)
	}
}

func ended(tr *Trajectory) *Trajectory {
	e := time.Date(2026, 12, 1, 0, 1, 0, 0, time.UTC)
	tr.EndedAt = &e
	return tr
}

func TestVerlRowMasks(t *testing.T) {
	// Turn 0: prompt [1 2 3], model says [4 5].
	// Turn 1: prompt [1 2 3 4 5 | 6 7] (env added 6 7), model says [8].
	// Turn 2: prompt [1 2 3 4 5 6 7 8 | 9], model says [10 11].
	tr := ended(&Trajectory{EpisodeID: "ep-a", EnvID: "env-a", Task: "task-a", Reward: 1,
		ExitReason: TaskComplete, NumTurns: 3, InitFrame: "f-init", StartedAt: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		Steps: []Step{
			{Index: 0, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4, 5}, ResponseMask: []int{1, 1},
				ResponseLogprobs: []float64{-0.1, -0.2}, FinishReason: "stop", ObsFrame: "f0"},
			{Index: 1, PromptIDs: []int{1, 2, 3, 4, 5, 6, 7}, ResponseIDs: []int{8}, ResponseMask: []int{1},
				ResponseLogprobs: []float64{-0.3}, FinishReason: "stop", ObsFrame: "f1"},
			{Index: 2, PromptIDs: []int{1, 2, 3, 4, 5, 6, 7, 8, 9}, ResponseIDs: []int{10, 11}, ResponseMask: []int{1, 1},
				ResponseLogprobs: []float64{-0.4, -0.5}, FinishReason: "length", ObsFrame: "f2"},
		}})
	row, err := VerlRow(tr)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v; want %v", name, got, want)
		}
	}
	check("prompt_ids", row.PromptIDs, []int{1, 2, 3})
	check("response_ids", row.ResponseIDs, []int{4, 5, 6, 7, 8, 9, 10, 11})
	check("response_mask", row.ResponseMask, []int{1, 1, 0, 0, 1, 0, 1, 1})
	check("response_logprobs", row.ResponseLogprobs, []float64{-0.1, -0.2, 0, 0, -0.3, 0, -0.4, -0.5})
	check("reward_score", *row.RewardScore, 1.0)
	check("drop", row.ExtraFields[FieldDrop], false)
	check("images", row.MultiModalData.Images, []FrameRef{{Frame: "f-init"}, {Frame: "f0"}, {Frame: "f1"}})
	check("metrics", row.Metrics, RowMetrics{EnvSteps: 3, DurationS: 60, ModelTokens: 5, EnvTokens: 3})
	check("num_turns", row.NumTurns, 3)
	check("exit reason", row.ExtraFields[FieldExitReason], "task_complete")
	check("task", row.ExtraFields[FieldTask], "task-a")
	check("episode id", row.ExtraFields[FieldEpisodeID], "ep-a")
	check("drift", row.ExtraFields[FieldTokenDrift], false)
	check("row turns", row.ExtraFields[FieldRowTurns], 3)
	check("finish", row.ExtraFields[FieldFinish], []string{"stop", "stop", "length"})
	if len(row.ResponseIDs) != len(row.ResponseMask) || len(row.ResponseIDs) != len(row.ResponseLogprobs) {
		t.Errorf("lengths ids %d mask %d logprobs %d; want equal", len(row.ResponseIDs), len(row.ResponseMask), len(row.ResponseLogprobs))
	}
}

func TestVerlRowDrift(t *testing.T) {
	// Turn 1's prompt re-tokenized the model's [4 5] as [45]: drift. The row
	// stops before turn 1 and says so; nothing is re-masked.
	tr := ended(&Trajectory{EpisodeID: "ep-d", Task: "task-d", Reward: 0, ExitReason: MaxSteps, NumTurns: 3,
		Steps: []Step{
			{Index: 0, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4, 5}, ResponseMask: []int{1, 1}},
			{Index: 1, PromptIDs: []int{1, 2, 3, 45, 6}, ResponseIDs: []int{7}, ResponseMask: []int{1}},
			{Index: 2, PromptIDs: []int{1, 2, 3, 45, 6, 7, 8}, ResponseIDs: []int{9}, ResponseMask: []int{1}},
		}})
	row, err := VerlRow(tr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(row.ResponseIDs, []int{4, 5}) || !reflect.DeepEqual(row.ResponseMask, []int{1, 1}) {
		t.Errorf("drift row ids %v mask %v; want [4 5] [1 1]", row.ResponseIDs, row.ResponseMask)
	}
	if row.ExtraFields[FieldTokenDrift] != true || row.ExtraFields[FieldDriftTurn] != 1 || row.ExtraFields[FieldRowTurns] != 1 {
		t.Errorf("extra fields %v; want token_drift true, drift_turn 1, row_turns 1", row.ExtraFields)
	}
	if row.ResponseLogprobs != nil || row.ExtraFields[FieldNoLogprobs] != true {
		t.Errorf("logprobs %v, missing flag %v; want none and flagged", row.ResponseLogprobs, row.ExtraFields[FieldNoLogprobs])
	}
	if row.NumTurns != 3 {
		t.Errorf("num_turns %d; want the episode's 3", row.NumTurns)
	}
}

func TestExportVerl(t *testing.T) {
	good := ended(&Trajectory{EpisodeID: "g", Reward: 1, ExitReason: TaskComplete, NumTurns: 2, Steps: []Step{
		{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}},
		{Index: 1, PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4}},
	}})
	drift := ended(&Trajectory{EpisodeID: "d", NumTurns: 2, ExitReason: AgentError, Steps: []Step{
		{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}},
		{Index: 1, PromptIDs: []int{9, 9}, ResponseIDs: []int{4}},
	}})
	scripted := ended(&Trajectory{EpisodeID: "s", NumTurns: 1, Steps: []Step{{Index: 0}}})
	running := &Trajectory{EpisodeID: "r", Steps: []Step{{Index: 0, PromptIDs: []int{1}, ResponseIDs: []int{2}}}}
	var buf bytes.Buffer
	st, err := ExportVerl(&buf, []*Trajectory{good, drift, scripted, running})
	if err != nil {
		t.Fatal(err)
	}
	want := ExportStats{Rows: 2, Skipped: 1, DriftRows: 1, ModelToks: 3, EnvToks: 1, Unfinished: 1}
	if st != want {
		t.Errorf("stats %+v; want %+v", st, want)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("got %d lines; want 2", len(lines))
	}
	var row map[string]any
	if err := json.Unmarshal(lines[0], &row); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"prompt_ids", "response_ids", "response_mask", "reward_score", "num_turns", "extra_fields"} {
		if _, ok := row[k]; !ok {
			t.Errorf("row lacks %s: %s", k, lines[0])
		}
	}
	mask, _ := json.Marshal(row["response_mask"])
	if string(mask) != "[1,0,1]" {
		t.Errorf("first row mask %s; want [1,0,1]", mask)
	}
	if _, err := VerlRow(scripted); !errors.Is(err, ErrNoTokens) {
		t.Errorf("VerlRow(no tokens) = %v; want ErrNoTokens", err)
	}
}
