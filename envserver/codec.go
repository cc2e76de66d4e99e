package envserver

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/internal/mpcheck"
	"github.com/vmihailenco/msgpack/v5"
)

// codec is the body encoding of one request, mirrored in its reply.
type codec int

const (
	codecMsgpack codec = iota
	codecJSON
)

func (c codec) contentType() string {
	if c == codecJSON {
		return "application/json"
	}
	return "application/msgpack"
}

// codecFor picks the codec from a Content-Type (msgpack unless it says json).
func codecFor(contentType []byte) codec {
	if bytes.Contains(contentType, []byte("json")) {
		return codecJSON
	}
	return codecMsgpack
}

// decode parses body into v strictly under the default limits.
func (c codec) decode(body []byte, v any) error {
	lim := DefaultLimits(0, 0)
	return c.decodeWithin(body, v, &lim)
}

// decodeWithin parses body into v strictly: unknown fields, trailing bytes
// and declared lengths that the body cannot hold are bad_request; a field
// over its cap in lim, or a body that would decode to more than
// lim.MaxDecodeFactor times its size, is refused before decoding.
func (c codec) decodeWithin(body []byte, v any, lim *api.Limits) error {
	if len(body) == 0 {
		return aci.Errorf(aci.CodeBadRequest, "empty body")
	}
	if c == codecJSON {
		if err := jsonAmplification(body, lim); err != nil {
			return err
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: %v", err)
		}
		if dec.More() {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: trailing data")
		}
		// The caps are checked in one place, the msgpack walk, over the
		// decoded request re-encoded.
		mp, err := msgpack.Marshal(v)
		if err != nil {
			return aci.Errorf(aci.CodeBadRequest, "malformed json: %v", err)
		}
		if err := newWalk(lim).Check(mp); err != nil {
			return typedWalkErr(err)
		}
		return nil
	}
	if err := newWalk(lim).Check(body); err != nil {
		return typedWalkErr(err)
	}
	dec := msgpack.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields(true)
	if err := dec.Decode(v); err != nil {
		return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
	}
	return nil
}

// typedWalkErr keeps a cap's typed error and makes the rest bad_request.
func typedWalkErr(err error) error {
	var e *aci.Error
	if errors.As(err, &e) {
		return e
	}
	return aci.Errorf(aci.CodeBadRequest, "malformed msgpack: %v", err)
}

func (c codec) encode(v any) ([]byte, error) {
	if c == codecJSON {
		return json.Marshal(v)
	}
	return api.Marshal(v)
}

// checkMsgpack walks one msgpack value under the default limits.
func checkMsgpack(b []byte) error {
	lim := DefaultLimits(0, 0)
	w := newWalk(&lim)
	return w.Check(b)
}

// newWalk is the pre-decode check of a request under lim: its caps are the
// limits table's, and decoding may allocate at most MaxDecodeFactor times
// the body (plus decodeFloor).
func newWalk(lim *api.Limits) *mpcheck.Walk {
	return &mpcheck.Walk{Caps: limitCaps{lim}, Factor: int64(lim.MaxDecodeFactor), Floor: decodeFloor,
		Over: func(body, est int64) error {
			return aci.Errorf(aci.CodePayloadTooLarge, "a body of %d bytes that decodes to ~%d bytes (over %d times its size): send fewer, fuller items", body, est, lim.MaxDecodeFactor)
		}}
}

// decodeFloor is decoding that any body may cost, however small.
const decodeFloor = 256 << 10

// Estimated decoded bytes per array element, by the field holding the
// array (an upper bound of the element's Go size plus what it points to).
const (
	costStruct = 512 // an action, a reset/step env, its pointers, and slice growth
	costString = 48  // a string header, slice growth and slack
	costNumber = 16
)

// limitCaps applies the limits table to the fields of a request.
type limitCaps struct{ l *api.Limits }

// Array implements mpcheck.Caps.
func (c limitCaps) Array(key string, n int) (int64, error) {
	l := c.l
	max, cost, code := l.MaxHave, int64(costStruct), aci.CodePayloadTooLarge
	switch key {
	case "envs", "steps", "env_ids":
		max, code = l.MaxBatch, aci.CodeBatchTooLarge
	case "actions":
		max = l.MaxActionsPerStep
	case "have":
		max, cost = l.MaxHave, costString
	case "args", "modifiers":
		max, cost = l.MaxArgs, costString
	case "prompt_ids", "response_ids", "response_logprobs":
		max, cost = l.MaxTokens, costNumber
	}
	if n > max {
		return 0, aci.Errorf(code, "field %q: %d items, over the limit of %d (see limits in /v1/spec)", key, n, max)
	}
	return cost, nil
}

// String implements mpcheck.Caps.
func (c limitCaps) String(key string, s []byte) error {
	max, what := c.l.MaxArgBytes, "max_arg_bytes"
	if key == "text" {
		max, what = c.l.MaxTextBytes, "max_text_bytes"
	}
	if len(s) > max {
		return aci.Errorf(aci.CodePayloadTooLarge, "field %q: %d bytes, over the limit of %d (%s in /v1/spec)", key, len(s), max, what)
	}
	if key == "keys" {
		if n := bytes.Count(s, []byte("+")) + 1; n > c.l.MaxKeyChord {
			return aci.Errorf(aci.CodePayloadTooLarge, "field \"keys\": a chord of %d keys, over the limit of %d (max_key_chord in /v1/spec)", n, c.l.MaxKeyChord)
		}
	}
	return nil
}

// jsonAmplification refuses a JSON body whose values would decode to more
// than MaxDecodeFactor times its size: objects and nulls (each may become a
// whole struct) and other array items are counted from above by a scan
// that skips strings.
func jsonAmplification(b []byte, lim *api.Limits) error {
	var cost int64
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
			cost += costString
		case '{':
			cost += costStruct
		case 'n':
			cost += costStruct // null
		case ',':
			cost += costNumber
		}
	}
	cost += int64(len(b))
	if limit := int64(lim.MaxDecodeFactor)*int64(len(b)) + decodeFloor; cost > limit {
		return aci.Errorf(aci.CodePayloadTooLarge, "a json body of %d bytes that decodes to ~%d bytes (over %d times its size)", len(b), cost, lim.MaxDecodeFactor)
	}
	return nil
}
