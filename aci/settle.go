package aci

// Settle bounds how long an observation waits for the screen to settle, on X
// DAMAGE events (docs/architecture.md, "Observation fidelity"). After an
// action the guest waits up to FirstMS for the screen to start changing;
// once it has, it waits until nothing has changed for QuietMS; it never waits
// longer than MaxMS in all. A plain observe (no action) only waits for quiet.
// MaxMS 0 turns settling off.
type Settle struct {
	FirstMS int `msgpack:"first_ms,omitempty" json:"first_ms,omitempty"`
	QuietMS int `msgpack:"quiet_ms" json:"quiet_ms"`
	MaxMS   int `msgpack:"max_ms" json:"max_ms"`
}

// MaxSettleMS caps every bound of a Settle.
const MaxSettleMS = 10000

// Validate checks the bounds: each in 0..MaxSettleMS.
func (s *Settle) Validate() error {
	if s == nil {
		return nil
	}
	for _, v := range []int{s.FirstMS, s.QuietMS, s.MaxMS} {
		if v < 0 || v > MaxSettleMS {
			return Errorf(CodeBadRequest, "observe.settle: first_ms, quiet_ms and max_ms must be 0..%d", MaxSettleMS)
		}
	}
	return nil
}

// SettleInfo says how an observation was settled: how long it waited, whether
// the screen changed meanwhile, whether it gave up at the ceiling while the
// screen was still changing, and whether it ended early because every
// process of the desktop had gone idle (nothing running, no timer due within
// the settle's windows) before those windows ran out, or because the browser
// with the focus answered that the frame after the action was drawn (Frame).
type SettleInfo struct {
	WaitedMS int64 `msgpack:"waited_ms" json:"waited_ms"`
	Damaged  bool  `msgpack:"damaged" json:"damaged"`
	TimedOut bool  `msgpack:"timed_out" json:"timed_out"`
	Idle     bool  `msgpack:"idle,omitempty" json:"idle,omitempty"`
	Frame    bool  `msgpack:"frame,omitempty" json:"frame,omitempty"`
	// InputMS: how long after the action the apps it went to answered a
	// ping, so had read its input; the first window counted from then.
	// Absent when no app was asked (one that does not answer pings).
	InputMS int64 `msgpack:"input_ms,omitempty" json:"input_ms,omitempty"`
}
