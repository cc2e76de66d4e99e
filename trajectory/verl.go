package trajectory

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrNoTokens is returned by VerlRow for an episode whose steps carry no
// token ids (a scripted or random policy): there is nothing to train on.
var ErrNoTokens = errors.New("episode has no token ids")

// Row is one verl-style training row: the whole multi-turn episode as one
// sequence, with the fields of verl's AgentLoopOutput. PromptIDs is the first
// turn's prompt; ResponseIDs is every token after it, model and environment
// alike; ResponseMask is 1 for model tokens and 0 for environment tokens
// (what each later prompt added after the previous response).
type Row struct {
	PromptIDs        []int          `json:"prompt_ids"`
	ResponseIDs      []int          `json:"response_ids"`
	ResponseMask     []int          `json:"response_mask"`
	ResponseLogprobs []float64      `json:"response_logprobs,omitempty"` // 0 for env tokens; absent unless every turn has them
	MultiModalData   MultiModalData `json:"multi_modal_data"`
	// RewardScore is the episode's reward; null when the episode was not
	// scored because the infrastructure failed (ExtraFields["drop"]), never a
	// stand-in 0.
	RewardScore *float64       `json:"reward_score"`
	NumTurns    int            `json:"num_turns"`
	Metrics     RowMetrics     `json:"metrics"`
	ExtraFields map[string]any `json:"extra_fields"`
}

// MultiModalData lists the screenshots the row's tokens show, in the order
// of their image placeholders: the reset observation, then the observation
// after each turn that a later turn's prompt carries (one screenshot per
// observation turn, as the Python agent loop builds prompts). A reference
// names the frame by hash; its bytes are in the trajectory store's frames
// directory (frames/<hh>/<hash>.<format>).
type MultiModalData struct {
	Images []FrameRef `json:"images"`
}

// FrameRef is one frame by its hash.
type FrameRef struct {
	Frame string `json:"frame"`
}

// RowMetrics are what the trajectory tells about the episode's cost.
type RowMetrics struct {
	EnvSteps    int     `json:"env_steps"`    // steps the env ran, tokenless ones included
	DurationS   float64 `json:"duration_s"`   // reset to the episode's end
	AgentErrors int     `json:"agent_errors"` // steps whose action was refused or failed
	ModelTokens int     `json:"model_tokens"` // mask-1 tokens
	EnvTokens   int     `json:"env_tokens"`   // mask-0 tokens
}

// Dropped reports whether an episode that ended for reason r failed for an
// infrastructure reason: its reward is not a score, and a trainer drops the
// row rather than training on it.
func Dropped(r ExitReason) bool {
	return r == SandboxDied || r == SetupError || r == ScorerError
}

// Extra field names that VerlRow sets.
const (
	FieldExitReason = "traj_exit_reason"
	FieldTask       = "task"
	FieldEpisodeID  = "episode_id"
	FieldEnvID      = "env_id"
	FieldSeed       = "seed"
	FieldSplit      = "split"    // the task instance's split (train, test)
	FieldInstance   = "instance" // the task instance's hash: equal hashes are one instance
	FieldForkOf     = "fork_of"
	FieldTokenDrift = "token_drift" // bool: some turn's prompt did not extend the context
	FieldDriftTurn  = "drift_turn"  // the first such turn; the row stops before it
	FieldRowTurns   = "row_turns"   // turns the row holds (< num_turns after drift)
	FieldFinish     = "finish_reasons"
	FieldNoLogprobs = "logprobs_missing" // bool: some turn lacked logprobs, so the row has none
	FieldDrop       = "drop"             // bool: infrastructure failure (Dropped); reward_score is null
	FieldEnvelope   = "envelope"         // what the episode was allowed to do (Envelope), when recorded
	FieldAudit      = "audit"            // every use of those powers (Audit)
)

// VerlRow builds the training row of one episode.
//
// The mask is derived, not trusted: the context after turn i is prompt_i +
// response_i, and turn i+1's prompt must start with it. The tokens the prompt
// adds after it (observations, tool results, the chat template) are
// environment tokens, mask 0; turn i+1's response ids are model tokens, mask
// 1 (or the step's own ResponseMask when it has one of the right length). A
// prompt that does not extend the context is token drift: the row is cut
// before that turn and flagged (token_drift, drift_turn), never re-masked.
func VerlRow(t *Trajectory) (Row, error) {
	// Tokenless steps at the end are a client's own ending (an agent loop
	// out of turns sends a scripted fail so the verifier scores the state);
	// they hold no tokens to train on. Tokenless steps between token turns
	// are not a model's episode.
	last := len(t.Steps)
	for last > 0 && len(t.Steps[last-1].PromptIDs) == 0 && len(t.Steps[last-1].ResponseIDs) == 0 {
		last--
	}
	var turns []*Step
	for i := range t.Steps[:last] {
		st := &t.Steps[i]
		if len(st.PromptIDs) == 0 && len(st.ResponseIDs) == 0 {
			continue
		}
		turns = append(turns, st)
	}
	if len(turns) == 0 {
		return Row{}, fmt.Errorf("episode %s: %w", t.EpisodeID, ErrNoTokens)
	}
	if len(turns) != last {
		return Row{}, fmt.Errorf("episode %s: %d of %d steps have no token ids: %w",
			t.EpisodeID, last-len(turns), last, ErrNoTokens)
	}
	drop := Dropped(t.ExitReason)
	row := Row{
		PromptIDs: append([]int{}, turns[0].PromptIDs...),
		NumTurns:  t.NumTurns,
		ExtraFields: map[string]any{
			FieldExitReason: string(t.ExitReason),
			FieldTask:       t.Task,
			FieldEpisodeID:  t.EpisodeID,
			FieldEnvID:      t.EnvID,
			FieldTokenDrift: false,
			FieldDrop:       drop,
		},
	}
	if !drop {
		r := t.Reward
		row.RewardScore = &r
	}
	if row.NumTurns == 0 {
		row.NumTurns = len(t.Steps)
	}
	row.Metrics.EnvSteps = len(t.Steps)
	for i := range t.Steps {
		if t.Steps[i].Error != nil {
			row.Metrics.AgentErrors++
		}
	}
	if t.EndedAt != nil {
		row.Metrics.DurationS = t.EndedAt.Sub(t.StartedAt).Seconds()
	}
	if t.Seed != nil {
		row.ExtraFields[FieldSeed] = *t.Seed
	}
	if t.Instance != nil {
		row.ExtraFields[FieldSplit] = t.Instance.Split
		row.ExtraFields[FieldInstance] = t.Instance.Hash
	}
	if t.ForkOf != "" {
		row.ExtraFields[FieldForkOf] = t.ForkOf
	}
	if t.Envelope != nil {
		row.ExtraFields[FieldEnvelope] = t.Envelope
	}
	row.ExtraFields[FieldAudit] = Audit(t)
	haveLogprobs := true
	for _, st := range turns {
		if len(st.ResponseLogprobs) != len(st.ResponseIDs) {
			haveLogprobs = false
		}
	}
	var finish []string
	ctx := []int{} // prompt_i + response_i
	used := 0
	for i, st := range turns {
		if i == 0 {
			ctx = append(ctx, st.PromptIDs...)
		} else {
			if !hasPrefix(st.PromptIDs, ctx) {
				row.ExtraFields[FieldTokenDrift] = true
				row.ExtraFields[FieldDriftTurn] = st.Index
				break
			}
			env := st.PromptIDs[len(ctx):]
			row.ResponseIDs = append(row.ResponseIDs, env...)
			for range env {
				row.ResponseMask = append(row.ResponseMask, 0)
				if haveLogprobs {
					row.ResponseLogprobs = append(row.ResponseLogprobs, 0)
				}
			}
			ctx = append(ctx[:0], st.PromptIDs...)
		}
		row.ResponseIDs = append(row.ResponseIDs, st.ResponseIDs...)
		mask := st.ResponseMask
		if len(mask) != len(st.ResponseIDs) {
			mask = nil
		}
		for j := range st.ResponseIDs {
			m := 1
			if mask != nil {
				m = mask[j]
			}
			row.ResponseMask = append(row.ResponseMask, m)
		}
		if haveLogprobs {
			row.ResponseLogprobs = append(row.ResponseLogprobs, st.ResponseLogprobs...)
		}
		ctx = append(ctx, st.ResponseIDs...)
		finish = append(finish, st.FinishReason)
		used++
	}
	if row.ResponseIDs == nil {
		row.ResponseIDs, row.ResponseMask = []int{}, []int{}
	}
	row.MultiModalData.Images = rowImages(t, turns[:used])
	for _, m := range row.ResponseMask {
		if m == 1 {
			row.Metrics.ModelTokens++
		} else {
			row.Metrics.EnvTokens++
		}
	}
	row.ExtraFields[FieldRowTurns] = used
	row.ExtraFields[FieldFinish] = finish
	if !haveLogprobs {
		row.ExtraFields[FieldNoLogprobs] = true
	}
	return row, nil
}

// rowImages are the screenshots of the row's turns in placeholder order: the
// reset observation, then the observation after each turn but the last.
func rowImages(t *Trajectory, turns []*Step) []FrameRef {
	refs := []FrameRef{}
	if t.InitFrame != "" {
		refs = append(refs, FrameRef{Frame: t.InitFrame})
	}
	for _, st := range turns[:max(0, len(turns)-1)] {
		if st.ObsFrame != "" {
			refs = append(refs, FrameRef{Frame: st.ObsFrame})
		}
	}
	return refs
}

func hasPrefix(s, prefix []int) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i, v := range prefix {
		if s[i] != v {
			return false
		}
	}
	return true
}

// ExportStats counts what ExportVerl wrote.
type ExportStats struct {
	Rows       int `json:"rows"`       // rows written
	Skipped    int `json:"skipped"`    // episodes without token ids
	DriftRows  int `json:"drift_rows"` // rows flagged token_drift
	ModelToks  int `json:"model_tokens"`
	EnvToks    int `json:"env_tokens"`
	Unfinished int `json:"unfinished"` // episodes skipped because they have not ended
	Dropped    int `json:"dropped"`    // rows flagged drop: not scored (infrastructure failure)
}

// ExportVerl writes one JSONL row per finished episode with token ids.
// Episodes without tokens and unfinished ones are skipped and counted;
// infrastructure failures are written flagged drop with a null reward_score
// and counted, so that a trainer drops them instead of training on a 0.
func ExportVerl(w io.Writer, ts []*Trajectory) (ExportStats, error) {
	var st ExportStats
	enc := json.NewEncoder(w)
	for _, t := range ts {
		if t.EndedAt == nil {
			st.Unfinished++
			continue
		}
		row, err := VerlRow(t)
		if errors.Is(err, ErrNoTokens) {
			st.Skipped++
			continue
		}
		if err != nil {
			return st, err
		}
		if err := enc.Encode(row); err != nil {
			return st, fmt.Errorf("verl export: %w", err)
		}
		st.Rows++
		if row.ExtraFields[FieldTokenDrift] == true {
			st.DriftRows++
		}
		if row.ExtraFields[FieldDrop] == true {
			st.Dropped++
		}
		st.ModelToks += row.Metrics.ModelTokens
		st.EnvToks += row.Metrics.EnvTokens
	}
	return st, nil
}
