package aci

import "time"

// Caps is the one table of the durations an agent may ask for. Every duration
// an action carries is range-checked against it before any arithmetic, so a
// huge value can never overflow into a negative deadline, and a step's
// durations together stay inside StepMS, so an agent's own waiting can never
// surface as an infrastructure timeout.
var Caps = struct {
	WaitMS int // one wait
	DragMS int // one drag's duration_ms
	StepMS int // the sum of a step's waits and drags
}{
	WaitMS: 30_000,
	DragMS: 5_000,
	StepMS: 30_000,
}

// DefaultDragMS is a drag's duration when duration_ms is zero.
const DefaultDragMS = 300

// Duration returns the time the action itself asks to take (a wait's ms, a
// drag's duration), range-checked against Caps: out of range is
// invalid_action, never clamped.
func (a *Action) Duration() (time.Duration, error) {
	switch a.Verb {
	case Wait:
		if a.MS < 0 || a.MS > Caps.WaitMS {
			return 0, Errorf(CodeInvalidAction, "wait: ms %d outside 0..%d", a.MS, Caps.WaitMS)
		}
		return time.Duration(a.MS) * time.Millisecond, nil
	case Drag:
		if a.DurationMS < 0 || a.DurationMS > Caps.DragMS {
			return 0, Errorf(CodeInvalidAction, "drag: duration_ms %d outside 0..%d", a.DurationMS, Caps.DragMS)
		}
		if a.DurationMS == 0 {
			return DefaultDragMS * time.Millisecond, nil
		}
		return time.Duration(a.DurationMS) * time.Millisecond, nil
	}
	if a.DurationMS != 0 || a.MS != 0 {
		if a.DurationMS < 0 || a.DurationMS > Caps.StepMS || a.MS < 0 || a.MS > Caps.StepMS {
			return 0, Errorf(CodeInvalidAction, "%s: ms/duration_ms outside 0..%d", a.Verb, Caps.StepMS)
		}
	}
	return 0, nil
}

// StepDuration checks every action's durations and their sum against Caps:
// a step whose waits and drags add up past the step budget is
// invalid_action before anything runs.
func StepDuration(acts []Action) (time.Duration, error) {
	var total time.Duration
	for i := range acts {
		d, err := acts[i].Duration()
		if err != nil {
			return 0, err
		}
		total += d // each term is at most Caps.StepMS: no overflow
		if total > time.Duration(Caps.StepMS)*time.Millisecond {
			return 0, Errorf(CodeInvalidAction, "the step's waits and drags add up past the step budget of %d ms", Caps.StepMS)
		}
	}
	return total, nil
}
