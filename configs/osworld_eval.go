package configs

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"path"
)

// Evaluators: an OSWorld evaluator becomes the metric library's spec
// (docs/osworld.md, "The verifier and the metric library").

// evaluator converts the evaluator into the library's spec.
func (c *conv) evaluator() map[string]any {
	ev := &c.t.Evaluator
	for _, s := range ev.Postconfig {
		switch s.Type {
		case "sleep", "activate_window":
			c.e.note("dropped: postconfig %s (the agent is frozen and the state settled before scoring)", s.Type)
		default:
			// Shinken never acts for the agent after the episode (no
			// saving its work, no keys pressed).
			c.e.refuse(RefuseConfig, "postconfig:"+s.Type)
		}
	}
	var funcs []string
	var one string
	list := false
	if json.Unmarshal(ev.Func, &one) == nil {
		funcs = []string{one}
	} else if json.Unmarshal(ev.Func, &funcs) == nil && len(funcs) > 0 {
		list = true
	} else {
		c.e.refuse(RefuseInvalid, "evaluator func")
		return nil
	}
	c.e.Metrics = funcs
	if !list && one == "infeasible" {
		return map[string]any{"func": "infeasible"}
	}
	for _, f := range funcs {
		if !osworldMetrics[f] {
			c.e.refuse(RefuseMetric, f)
		}
	}
	getters := func(raw json.RawMessage, expected bool) any {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		if list {
			var gs []map[string]any
			if json.Unmarshal(raw, &gs) != nil || len(gs) != len(funcs) {
				c.e.refuse(RefuseInvalid, "evaluator getters do not match func")
				return nil
			}
			out := make([]any, len(gs))
			for i, g := range gs {
				if g != nil {
					out[i] = c.getter(g)
				}
			}
			return out
		}
		var g map[string]any
		if json.Unmarshal(raw, &g) != nil {
			c.e.refuse(RefuseInvalid, "evaluator getter")
			return nil
		}
		if g == nil {
			return nil
		}
		return c.getter(g)
	}
	spec := map[string]any{"func": json.RawMessage(ev.Func), "files": c.files}
	if ev.Conj != "" {
		if ev.Conj != "and" && ev.Conj != "or" {
			c.e.refuse(RefuseInvalid, "conj "+ev.Conj)
		}
		spec["conj"] = ev.Conj
	}
	spec["result"] = getters(ev.Result, false)
	if g := getters(ev.Expected, true); g != nil {
		spec["expected"] = g
	}
	if len(ev.Options) > 0 && string(ev.Options) != "null" {
		spec["options"] = json.RawMessage(ev.Options)
	}
	return spec
}

// osworldMetrics are the metrics osworld_lib.py implements.
var osworldMetrics = map[string]bool{
	"exact_match": true, "check_include_exclude": true, "is_in_list": true, "literal_match": true,
	"fuzzy_match": true, "check_direct_json_object": true, "compare_text_file": true,
	"diff_text_file": true, "compare_csv": true, "file_contains": true, "check_list": true,
}

// getter converts one getter spec, mapping its paths and commands.
func (c *conv) getter(g map[string]any) map[string]any {
	typ, _ := g["type"].(string)
	out := map[string]any{}
	for k, v := range g {
		out[k] = v
	}
	switch typ {
	case "rule":
	case "vm_file":
		if truthy(g["time_suffix"]) {
			c.e.refuse(RefuseGetter, "vm_file:time_suffix")
		}
		mapPath := func(v any) any {
			s, _ := v.(string)
			rel, ok := homeRel(s)
			if !ok || rel == "" {
				c.e.refuse(RefusePath, s)
				return s
			}
			return "~/" + rel
		}
		if ps, ok := g["path"].([]any); ok {
			m := make([]any, len(ps))
			for i, p := range ps {
				m[i] = mapPath(p)
			}
			out["path"] = m
		} else {
			out["path"] = mapPath(g["path"])
		}
	case "cloud_file":
		urls, dests := []any{g["path"]}, []any{g["dest"]}
		if truthy(g["multi"]) {
			urls, _ = g["path"].([]any)
			dests, _ = g["dest"].([]any)
		}
		for i, u := range urls {
			us, _ := u.(string)
			var ds string
			if i < len(dests) {
				ds, _ = dests[i].(string)
			}
			if ds == "" {
				ds = path.Base(us)
			}
			b, ok := c.cacheFile(us, path.Base(ds))
			if !ok {
				continue
			}
			if len(b) > 1<<20 {
				c.e.refuse(RefuseCacheTooBig, ds)
				continue
			}
			sum := sha256.Sum256(b)
			c.files[us] = map[string]string{"sha256": hex.EncodeToString(sum[:]), "b64": base64.StdEncoding.EncodeToString(b)}
		}
	case "vm_command_line":
		raw, _ := json.Marshal(g)
		var m map[string]json.RawMessage
		_ = json.Unmarshal(raw, &m)
		argv, sh, ok := command(m)
		if !ok {
			c.e.refuse(RefuseInvalid, "vm_command_line without a command")
			return out
		}
		cmd, ok := c.shellCommand(argv, sh, "AGENT_HOME")
		if ok {
			out["command"] = cmd
			delete(out, "shell")
		}
	default:
		c.e.refuse(RefuseGetter, typ)
	}
	return out
}

// truthy is Python's truth of a JSON value, as OSWorld's getters test
// their flags (some tasks write "multi": "true").
func truthy(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return false
}
