package trajectory

import "github.com/shinken-rl/shinken/aci"

// Envelope is what an episode was allowed to do, fixed when it started
// (docs/api.md, "Capabilities and audit"): the agent's powers (apps, a
// shell, the clipboard), the trainer's (exec, files), the sandbox's
// network, and its screen.
type Envelope struct {
	// Apps are the programs the agent's launch_app may start (with Shell:
	// these and any other).
	Apps []string `msgpack:"apps" json:"apps"`
	// Shell: the task gives the agent a shell, so launch_app starts any
	// program on the sandbox's PATH.
	Shell bool `msgpack:"shell" json:"shell"`
	// Clipboard: the agent's clipboard_get and clipboard_set verbs, on the
	// sandbox's own X selection.
	Clipboard bool `msgpack:"clipboard" json:"clipboard"`
	// TrainerExec: the server runs POST /v1/exec in this episode's sandbox.
	TrainerExec bool `msgpack:"trainer_exec" json:"trainer_exec"`
	// TrainerFiles: the server moves files in and out of the sandbox
	// (POST /v1/files/put, /v1/files/get).
	TrainerFiles bool `msgpack:"trainer_files" json:"trainer_files"`
	// Network is "none" where the sandbox has a network namespace of its
	// own with no interface but loopback, "host" where it shares the host's.
	Network string `msgpack:"network" json:"network"`
	// Screen is the sandbox's screen in pixels (zero where the server does
	// not report it).
	ScreenW int `msgpack:"screen_w,omitempty" json:"screen_w,omitempty"`
	ScreenH int `msgpack:"screen_h,omitempty" json:"screen_h,omitempty"`
}

// Use is one use of a power of the Envelope, by the agent (an action of
// step Step) or by the trainer (an event after AfterStep agent steps).
type Use struct {
	By   string `msgpack:"by" json:"by"`     // UseAgent or UseTrainer
	Kind string `msgpack:"kind" json:"kind"` // launch_app, clipboard_set, clipboard_get, exec, put_file, get_file
	// Step is the agent step that acted (By agent) or the number of agent
	// steps before the trainer's call (By trainer).
	Step int `msgpack:"step" json:"step"`
	// Argv is what launch_app started (app, then its args) or what exec
	// ran (with Shell for a shell command).
	Argv  []string `msgpack:"argv,omitempty" json:"argv,omitempty"`
	Shell string   `msgpack:"shell,omitempty" json:"shell,omitempty"`
	Exit  *int     `msgpack:"exit,omitempty" json:"exit,omitempty"`
	// Bytes is the size of what moved: clipboard_set's text, a file.
	Bytes  int    `msgpack:"bytes,omitempty" json:"bytes,omitempty"`
	Path   string `msgpack:"path,omitempty" json:"path,omitempty"`
	SHA256 string `msgpack:"sha256,omitempty" json:"sha256,omitempty"`
	// FileKind "tar": a directory moved as an archive; Offset: the place
	// of a file's chunk.
	FileKind string `msgpack:"file_kind,omitempty" json:"file_kind,omitempty"`
	Offset   int64  `msgpack:"offset,omitempty" json:"offset,omitempty"`
	// Failed: the action or the call failed (it may have done part of
	// its work); Error is its error (an agent's) or error code (a
	// trainer call's).
	Failed bool   `msgpack:"failed,omitempty" json:"failed,omitempty"`
	Error  string `msgpack:"error,omitempty" json:"error,omitempty"`
}

// Who used a power.
const (
	UseAgent   = "agent"
	UseTrainer = "trainer"
)

// Audit lists every use of the envelope's powers in t, in the order they
// happened: the agent's launch_app and clipboard actions, and the
// trainer's exec and file transfers. It is derived from the steps and
// events, so it is never out of step with them; an action a failed step
// never ran is absent, the one that failed is marked Failed.
func Audit(t *Trajectory) []Use {
	uses := []Use{}
	ev := 0
	trainer := func(upTo int) {
		for ; ev < len(t.Events) && t.Events[ev].AfterStep <= upTo; ev++ {
			if u, ok := eventUse(&t.Events[ev]); ok {
				uses = append(uses, u)
			}
		}
	}
	trainer(0)
	for i := range t.Steps {
		st := &t.Steps[i]
		ran := len(st.Actions)
		if st.Ran != nil {
			ran = min(*st.Ran, ran)
		}
		for j := 0; j < ran; j++ {
			a := &st.Actions[j]
			u := Use{By: UseAgent, Step: st.Index}
			switch a.Verb {
			case aci.LaunchApp:
				u.Kind, u.Argv = string(a.Verb), append([]string{a.App}, a.Args...)
			case aci.ClipboardSet:
				u.Kind, u.Bytes = string(a.Verb), len(a.Text)
			case aci.ClipboardGet:
				u.Kind = string(a.Verb)
			default:
				continue
			}
			if st.Error != nil && j == ran-1 {
				u.Failed, u.Error = true, st.Error.Error()
			}
			uses = append(uses, u)
		}
		trainer(i + 1)
	}
	trainer(int(^uint(0) >> 1))
	return uses
}

func eventUse(e *Event) (Use, bool) {
	u := Use{By: UseTrainer, Kind: e.Kind, Step: e.AfterStep, Error: e.Error, Failed: e.Error != ""}
	switch e.Kind {
	case EventExec:
		u.Argv, u.Shell, u.Exit = e.Argv, e.Shell, e.Exit
	case EventPutFile, EventGetFile:
		u.Path, u.SHA256, u.Bytes, u.FileKind, u.Offset = e.Path, e.SHA256, e.Size, e.FileKind, e.Offset
	default:
		return Use{}, false // an observation uses no power
	}
	return u, true
}
