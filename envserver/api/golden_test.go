package api

// Golden wire files: representative values of every trainer⇄server type,
// encoded once here and committed under testdata/golden as <name>.msgpack with
// a <name>.json twin. This test fails when a Go change alters an encoding; the
// Python client's tests (clients/python/tests/test_golden.py) decode the same
// files and re-encode them with the client's own encoder, so the two sides
// cannot drift apart silently.
//
// Encoding choice: msgpack v5 with sorted map keys (Go map iteration is
// random; SetSortMapKeys(true) sorts map[string]any/string/bool, and the
// init below registers a sorting encoder for the other string-keyed map types
// these values use, such as BatchReply.Frames and Info.Timings) and
// UseCompactInts(true) (every integer in its shortest form, which is what
// Python's msgpack writes). Structs encode as
// maps in field-declaration order with omitempty honoured, so the Python
// client builds its request maps in that same order and gets identical bytes.
// Decoders on both sides accept either int width, so a server that encodes
// with msgpack.Marshal's defaults still interoperates; only these files fix
// the compact form.
//
// Regenerate after an intended wire change with:
//
//	go test ./envserver/api -run Golden -update

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/trajectory"
	"github.com/vmihailenco/msgpack/v5"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the values in golden_test.go")

const goldenDir = "testdata/golden"

func ptr[T any](v T) *T { return &v }

// goldenObs is an observation of a downscaled 1280x800 screen.
func goldenObs(frame string) *aci.Observation {
	return &aci.Observation{
		Frame:   frame,
		W:       4,
		H:       2,
		Format:  aci.FormatRaw,
		Pointer: [2]int{640, 400},
		Display: aci.Display{
			W: 1280, H: 800,
			SourceRect: aci.Rect{X: 0, Y: 0, W: 1280, H: 800},
			Delivered:  aci.Rect{W: 4, H: 2},
		},
	}
}

// rawFrame is a 4x2 RGB24 image: a red, green, blue, white top row over a
// black-to-grey bottom row, so a decoder that swaps channels or rows fails.
var rawFrame = []byte{
	255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255,
	0, 0, 0, 64, 64, 64, 128, 128, 128, 192, 192, 192,
}

const (
	hashA = "0123456789abcdef0123456789abcdef"
	hashB = "fedcba9876543210fedcba9876543210"
)

// goldenValues maps each golden file's name to the value it encodes.
func goldenValues() map[string]any {
	started := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ended := time.Date(2026, 12, 1, 10, 0, 3, 250000000, time.UTC)
	return map[string]any{
		"reset_request": ResetRequest{
			Envs: []ResetEnv{
				{Task: "xterm-hello-file", Seed: ptr(int64(7))},
				{EnvID: "env-1", Task: "xterm-hello-file", Coords: "frame", MaxSteps: 5},
				{Task: "xterm-hello-file", Screen: &Size{W: 1024, H: 768}},
			},
			Observe: &Observe{Format: aci.FormatPNG, MaxLongEdge: 1024},
			Have:    []string{hashA},
		},
		"step_request": StepRequest{
			Steps: []StepEnv{
				{EnvID: "env-1", Action: &aci.Action{Verb: aci.Click, Target: aci.Px(200, 150.5), Button: "left"}, Coords: "frame"},
				{EnvID: "env-2", Actions: []aci.Action{
					{Verb: aci.TypeText, Text: "echo 'hello shinken' > ~/hello.txt"},
					{Verb: aci.Key, Keys: "Return"},
					{Verb: aci.Scroll, X: ptr(10.0), Y: ptr(20.0), DY: -3},
					{Verb: aci.Drag, Target: aci.Norm(0.25, 0.5), To: aci.Norm(0.75, 0.5), DurationMS: 200},
					{Verb: aci.LaunchApp, App: "xterm", Args: []string{"-geometry", "80x24"}},
					{Verb: aci.ActivateWindow, WindowID: 4194305},
					{Verb: aci.Wait, MS: 300},
					{Verb: aci.Click, X: ptr(5.0), Y: ptr(6.0), Modifiers: []string{"ctrl"}},
				}},
				{EnvID: "env-3", Text: ptr("pyautogui.click(10, 20)"), Dialect: "pyautogui", Coords: map[string]any{"w": 1000, "h": 625}, Tokens: &Tokens{
					PromptIDs:        []int{1, 2, 3, 70000},
					ResponseIDs:      []int{4, 5},
					ResponseLogprobs: []float64{-0.5, -1.25},
					FinishReason:     "stop",
				}, RequestID: "3f2a9c0d1b7e4a55"},
			},
			Observe: &Observe{Format: aci.FormatRaw, Scope: aci.ScopeActiveWindow, Settle: &aci.Settle{FirstMS: 100, QuietMS: 50, MaxMS: 1500}},
			Have:    []string{hashA, hashB},
		},
		"fork_request":  ForkRequest{EnvID: "env-1", N: 4, Observe: &Observe{Format: aci.FormatJPEG, Quality: 80}},
		"close_request": CloseRequest{EnvIDs: []string{"env-1", "env-2"}},
		// Named checkpoints: take one, start from it by reset and by fork,
		// describe it, delete it.
		"checkpoint_request":       CheckpointRequest{EnvID: "env-1"},
		"checkpoint_reply":         Checkpoint{CheckpointID: "ckpt-1", EnvID: "env-1", EpisodeID: "ep-1", Task: "xterm-hello-file", Step: 2, Frame: hashA, Bytes: 40960, ExpiresInMS: 600000},
		"checkpoint_delete_reply":  CheckpointDeleteReply{CheckpointID: "ckpt-1", Deleted: true},
		"checkpoint_reset_request": ResetRequest{Envs: []ResetEnv{{Checkpoint: "ckpt-1", MaxSteps: 5}}},
		"checkpoint_fork_request":  ForkRequest{Checkpoint: "ckpt-1", N: 8},
		"close_reply":              CloseReply{Closed: []string{"env-1"}},
		"reset_reply": BatchReply{
			Results: []Result{
				{EnvID: "env-1", EpisodeID: "ep-1", Obs: goldenObs(hashA), Info: &Info{Step: 0, Task: "xterm-hello-file", Timings: map[string]int64{"lease_us": 1500, "capture_us": 900}}},
				{EnvID: "env-2", EpisodeID: "ep-2", Obs: goldenObs(hashA), Info: &Info{Step: 0, Task: "xterm-hello-file"}},
			},
			Frames: map[string][]byte{hashA: rawFrame},
		},
		"step_reply": BatchReply{
			Results: []Result{
				{EnvID: "env-1", Obs: goldenObs(hashB), Reward: Score(1), Terminated: true, Info: &Info{
					Step: 3, ExitReason: string(trajectory.TaskComplete), Task: "xterm-hello-file",
					Timings: map[string]int64{"act_us": 12000, "verify_us": 250000, "capture_us": 800},
					Settle:  &aci.SettleInfo{WaitedMS: 74, Damaged: true},
					Results: []aci.ActionResult{{Status: aci.StatusOK, Text: ptr("copied")}, {Status: aci.StatusOK, PID: 321, WindowID: 4194305},
						{Status: aci.StatusOK, Windows: []aci.Window{{ID: 4194305, Title: "Terminal", Class: "XTerm", PID: 321, Focused: true, Geometry: aci.Rect{X: 10, Y: 20, W: 640, H: 400}}}},
						{Status: aci.StatusOK}},
					Coords: "frame",
				}},
				{EnvID: "env-2", Obs: goldenObs(hashA), Reward: Score(0), Truncated: true, Info: &Info{
					// A final step that the sandbox refused: agent_error outranks max_steps.
					Step: 10, ExitReason: string(trajectory.AgentError),
					Error:   &aci.Error{Code: aci.CodeInvalidAction, Message: "point (5000, 10) is off the 1280x800 screen"},
					Settle:  &aci.SettleInfo{WaitedMS: 1500, Damaged: true, TimedOut: true},
					Results: []aci.ActionResult{{Status: string(aci.CodeInvalidAction), Error: &aci.Error{Code: aci.CodeInvalidAction, Message: "point (5000, 10) is off the 1280x800 screen"}}, {Status: aci.StatusSkipped}},
				}},
				{EnvID: "env-3", Error: &aci.Error{Code: aci.CodeDialectError, Message: "cannot parse model output", Detail: map[string]any{"snippet": "pyautogui.clik("}}},
				// An end that is not a score: reward null.
				{EnvID: "env-4", Obs: goldenObs(hashB), Terminated: true, Info: &Info{
					Step: 2, ExitReason: string(trajectory.ScorerError), Task: "xterm-hello-file",
					Error: &aci.Error{Code: aci.CodeScorerError, Message: "the verifier printed no number, on the task's clean state too"},
				}},
			},
			Frames: map[string][]byte{hashB: rawFrame},
		},
		"fork_reply": BatchReply{
			Results: []Result{
				// fork_of names the parent env (the trajectory's fork_of names its episode).
				{EnvID: "env-4", EpisodeID: "ep-4", Obs: goldenObs(hashA), Info: &Info{Step: 2, Task: "xterm-hello-file", ForkOf: "env-1"}},
				{EnvID: "env-5", EpisodeID: "ep-5", Obs: goldenObs(hashA), Info: &Info{Step: 2, Task: "xterm-hello-file", ForkOf: "env-1"}},
				// From a named checkpoint: fork_of is the env it was taken from.
				{EnvID: "env-6", EpisodeID: "ep-6", Obs: goldenObs(hashA), Info: &Info{Step: 2, Task: "xterm-hello-file", ForkOf: "env-1", Checkpoint: "ckpt-1"}},
			},
			Frames: map[string][]byte{},
		},
		"error_reply": ErrorReply{Error: &aci.Error{Code: aci.CodeBatchTooLarge, Message: "batch of 300 envs exceeds --max-batch 256", Detail: map[string]any{"max_batch": 256}}},
		"spec": Spec{
			Protocol: Protocol,
			Verbs:    verbNames(),
			Dialects: []string{"pyautogui", "xml", "json", "auto"},
			Observation: ObservationSpec{
				Formats: []string{aci.FormatPNG, aci.FormatJPEG, aci.FormatRaw},
				Default: Observe{Format: aci.FormatPNG},
				Screen:  &Size{W: 1280, H: 800}, Screens: []Size{{W: 1280, H: 800}, {W: 1024, H: 768}},
			},
			Tasks: []TaskInfo{{ID: "xterm-hello-file", Instruction: "create hello.txt", MaxSteps: 10}},
			Pool:  PoolSpec{Provider: "process", Size: 2, Warm: 2, MaxSandboxes: 16, SnapshotKind: "disk", Fork: true, Checkpoint: true, Confined: true, Notes: "in-memory app state is not carried across fork"},
			Limits: Limits{MaxBatch: 256, MaxBodyBytes: 8 << 20, MaxActionsPerStep: 64, MaxHave: 4096, MaxTextBytes: 64 << 10, MaxKeyChord: 8, MaxArgBytes: 4096, MaxArgs: 64, MaxTokens: 1 << 18, MaxRequestIDBytes: 128, MaxDecodeFactor: 48,
				MaxCheckpoints: 64, MaxCheckpointBytes: 4 << 30, CheckpointTTLS: 600},
			Trainer: TrainerSpec{Observe: true, Files: true, MaxPutBytes: 32 << 20, MaxGetBytes: 1 << 20, MaxTreeEntries: 4096, Exec: true, MaxExecMS: 60000, MaxExecOutputBytes: 256 << 10},
		},
		"trajectory": trajectory.Trajectory{
			EpisodeID: "ep-1", EnvID: "env-1", Task: "xterm-hello-file", Seed: ptr(int64(7)),
			Steps: []trajectory.Step{
				{Index: 0, Actions: []aci.Action{{Verb: aci.Click, X: ptr(200.0), Y: ptr(200.0)}},
					Text: "click(200, 200)", Dialect: "pyautogui",
					PromptIDs: []int{1, 2, 3}, ResponseIDs: []int{4, 5}, ResponseMask: []int{1, 1},
					ResponseLogprobs: []float64{-0.1, -0.2}, FinishReason: "stop",
					ObsFrame: hashA, TMS: 120},
				{Index: 1, Actions: []aci.Action{{Verb: aci.Done}},
					PromptIDs: []int{1, 2, 3, 4, 5, 6, 7}, ResponseIDs: []int{8}, ResponseMask: []int{1},
					ObsFrame: hashB, Reward: 1, TMS: 3250},
			},
			Reward: 1, ExitReason: trajectory.TaskComplete, NumTurns: 2,
			StartedAt: started, EndedAt: &ended, InitFrame: hashA,
			Events: []trajectory.Event{
				{Kind: trajectory.EventPutFile, AfterStep: 0, TMS: 40, Path: "~/fixture.csv", SHA256: strings.Repeat("ab", 32), Size: 120, DurationMS: 3},
				{Kind: trajectory.EventExec, AfterStep: 1, TMS: 1500, Shell: "cat ~/out.txt", Exit: ptr(0), StdoutBytes: 12, DurationMS: 30},
				{Kind: trajectory.EventObserve, AfterStep: 1, TMS: 1600, Frame: hashB, DurationMS: 8},
			},
		},
		"error_codes":  errorCodes(),
		"error_faults": errorFaults(),
	}
}

func verbNames() []string {
	vs := make([]string, len(aci.AgentVerbs))
	for i, v := range aci.AgentVerbs {
		vs[i] = string(v)
	}
	return vs
}

// errorCodes is aci.Codes as code → HTTP status, so the Python client can
// check that it maps every code the Go side knows.
func errorCodes() map[string]int {
	m := make(map[string]int, len(aci.Codes))
	for c, b := range aci.Codes {
		m[string(c)] = b.Status
	}
	return m
}

// errorFaults is aci.Codes as code → whose fault, so the Python client's
// decisions (what ends an episode as infrastructure) follow the one table.
func errorFaults() map[string]string {
	m := make(map[string]string, len(aci.Codes))
	for c, b := range aci.Codes {
		m[string(c)] = string(b.Fault)
	}
	return m
}

// encodeGolden is the server's own encoder: the golden files hold exactly
// the bytes the server sends for these values.
func encodeGolden(v any) ([]byte, error) { return Marshal(v) }

func TestGolden(t *testing.T) {
	values := goldenValues()
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	sort.Strings(names)
	if *update {
		if err := os.MkdirAll(goldenDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		v := values[name]
		t.Run(name, func(t *testing.T) {
			mp, err := encodeGolden(v)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			js, err := json.MarshalIndent(v, "", "  ")
			if err != nil {
				t.Fatalf("json: %v", err)
			}
			js = append(js, '\n')
			mpPath := filepath.Join(goldenDir, name+".msgpack")
			jsPath := filepath.Join(goldenDir, name+".json")
			if *update {
				for p, b := range map[string][]byte{mpPath: mp, jsPath: js} {
					if err := os.WriteFile(p, b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			want, err := os.ReadFile(mpPath)
			if err != nil {
				t.Fatalf("%v (run go test ./envserver/api -run Golden -update)", err)
			}
			if !bytes.Equal(mp, want) {
				t.Errorf("%s: got %x; want %x", mpPath, mp, want)
			}
			wantJS, err := os.ReadFile(jsPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(js, wantJS) {
				t.Errorf("%s: got %s; want %s", jsPath, js, wantJS)
			}

			// The committed bytes decode back into the Go type and
			// re-encode to themselves: the decode side is pinned too.
			typ := reflect.TypeOf(v)
			msg := reflect.New(typ)
			dec := msgpack.NewDecoder(bytes.NewReader(want))
			dec.DisallowUnknownFields(true)
			if err := dec.Decode(msg.Interface()); err != nil {
				t.Fatalf("decode %s: %v", mpPath, err)
			}
			again, err := encodeGolden(msg.Elem().Interface())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(again, want) {
				t.Errorf("%s round trip: got %x; want %x", mpPath, again, want)
			}
			// The JSON twin decodes and re-encodes to itself. (Its numbers
			// inside `any` fields come back as float64, so the twin is
			// compared with the msgpack file semantically, on the Python side.)
			fromJSON := reflect.New(typ)
			if err := json.Unmarshal(wantJS, fromJSON.Interface()); err != nil {
				t.Fatalf("decode %s: %v", jsPath, err)
			}
			if viaJSON, err := json.MarshalIndent(fromJSON.Elem().Interface(), "", "  "); err != nil || !bytes.Equal(append(viaJSON, '\n'), wantJS) {
				t.Errorf("%s round trip: got %s (err %v); want %s", jsPath, viaJSON, err, wantJS)
			}
		})
	}
}

// TestGoldenNoStrays fails on a golden file no value produces, so a renamed
// value cannot leave a stale file that the Python side keeps testing against.
func TestGoldenNoStrays(t *testing.T) {
	values := goldenValues()
	entries, err := os.ReadDir(goldenDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		name := strings.TrimSuffix(strings.TrimSuffix(e.Name(), ".msgpack"), ".json")
		if _, ok := values[name]; !ok {
			t.Errorf("stray golden file %s: no value in goldenValues", e.Name())
		}
	}
}
