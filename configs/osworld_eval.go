package configs

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Evaluators: an OSWorld evaluator becomes the metric library's spec
// (docs/osworld.md, "The verifier and the metric library").

// evaluator converts the evaluator into the library's spec.
func (c *conv) evaluator() map[string]any {
	ev := &c.t.Evaluator
	reads := c.configReads()
	for _, s := range ev.Postconfig {
		switch {
		case s.Type == "sleep" || s.Type == "activate_window":
			c.e.note("dropped: postconfig %s (the agent is frozen and the state settled before scoring)", s.Type)
		case restartsBrowser(s):
			// OSWorld kills and relaunches Chrome so that its profile is
			// on disk: the before_score close does that.
			c.closeBrowser = true
			c.e.note("postconfig %s of the browser: before_score closes Chromium", s.Type)
		case restartsVLC(s) && reads["vlcrc"] && len(reads) == 1:
			// VLC writes vlcrc when its Preferences are saved; what it
			// writes on quit (pkill's SIGTERM) is the same file, and no
			// setting OSWorld's vlcrc metrics read changes it elsewhere.
			c.e.note("dropped: postconfig %s of VLC (VLC writes vlcrc when its Preferences are saved, which is where these settings are made)", s.Type)
		case quitsGIMP(s) && reads["gimprc"] && len(reads) == 1:
			// GIMP writes gimprc when its Preferences are confirmed (OK).
			c.e.note("dropped: postconfig ctrl+q of GIMP (GIMP writes gimprc when its Preferences are confirmed)")
		case quitsGIMP(s):
			// sessionrc and action-history are written only when GIMP
			// quits, which Shinken does not do for the agent.
			c.e.refuse(RefuseConfig, "postconfig:quit gimp (it writes "+strings.Join(sortedKeys(reads), ", ")+" only as it quits)")
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
					if expected {
						c.metricRules(funcs[i], g)
					}
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
		if expected {
			c.metricRules(funcs[0], g)
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
	"is_expected_bookmarks": true, "check_font_size": true,
	"check_qt_bgcone": true, "check_qt_max_volume": true, "check_qt_minimal_view": true,
	"check_qt_slider_colours": true, "check_one_instance_when_started_from_file": true,
	"check_global_key_play_pause": true, "is_vlc_recordings_folder": true, "check_config_status": true,
}

// configReads names the app config files the evaluator's getters read:
// "vlcrc" (vlc_config) and each gimp_config_file's file_name.
func (c *conv) configReads() map[string]bool {
	out := map[string]bool{}
	for _, raw := range []json.RawMessage{c.t.Evaluator.Result, c.t.Evaluator.Expected} {
		var gs []map[string]any
		var g map[string]any
		if json.Unmarshal(raw, &g) == nil && g != nil {
			gs = []map[string]any{g}
		} else {
			_ = json.Unmarshal(raw, &gs)
		}
		for _, g := range gs {
			switch typ, _ := g["type"].(string); typ {
			case "vlc_config":
				out["vlcrc"] = true
			case "gimp_config_file":
				name, _ := g["file_name"].(string)
				out[name] = true
			}
		}
	}
	return out
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// stepArgv is the command a postconfig execute, launch or command step
// runs, a shell string split into words.
func stepArgv(s oswStep) ([]string, bool) {
	if s.Type != "execute" && s.Type != "launch" && s.Type != "command" {
		return nil, false
	}
	argv, sh, ok := command(s.Parameters)
	if !ok {
		return nil, false
	}
	if argv == nil {
		argv = strings.Fields(sh)
	}
	return argv, true
}

// restartsVLC reports whether a postconfig step only kills or relaunches
// VLC (pkill vlc, vlc).
func restartsVLC(s oswStep) bool {
	argv, ok := stepArgv(s)
	if !ok {
		return false
	}
	return len(argv) == 2 && (argv[0] == "pkill" || argv[0] == "killall") && argv[1] == "vlc" ||
		len(argv) == 1 && argv[0] == "vlc"
}

// quitsGIMP reports whether a postconfig step is a pyautogui program that
// presses ctrl+q (GIMP's quit), after an Escape or not.
func quitsGIMP(s oswStep) bool {
	if s.Type != "execute" && s.Type != "command" {
		return false
	}
	argv, _, ok := command(s.Parameters)
	if !ok || len(argv) != 3 || (argv[0] != "python" && argv[0] != "python3") || argv[1] != "-c" {
		return false
	}
	return gimpQuitKeys.MatchString(strings.ReplaceAll(strings.ReplaceAll(argv[2], " ", ""), `"`, "'"))
}

var gimpQuitKeys = regexp.MustCompile(`^importpyautogui;(pyautogui\.press\(\[?'esc'\]?\);)?pyautogui\.hotkey\(\[?'ctrl','q'\]?\);?$`)

// browserGetters are the getters that read Chromium's profile (the files
// guestd hands the verifier in $SK_BROWSER after before_score closed the
// browser: docs/architecture.md, "Before scoring").
var browserGetters = map[string]bool{
	"enable_do_not_track": true, "enable_enhanced_safety_browsing": true, "profile_name": true,
	"bookmarks": true, "chrome_font_size": true,
}

// unsoundGetters are OSWorld getters whose verdict the Chromium Debian
// ships decides whatever the agent does (checked on a fresh profile of
// Chromium 156).
var unsoundGetters = map[string]string{
	"data_delete_automacally": "a fresh profile already has profile.default_content_setting_values, which is all it tests: doing nothing passes",
	"default_search_engine":   "this Chromium keeps the default engine under default_search_provider_data.mirrored_template_url_data and names Bing \"Microsoft Bing\"; the getter reads template_url_data and finds the fallback \"Google\" whatever is set",
	"enabled_experiments":     "the flags such tasks name (chrome-refresh-2023, chrome-webui-refresh-2023) are gone from this Chromium's chrome://flags",
}

// restartsBrowser reports whether a postconfig step only kills or
// relaunches Chrome (pkill chrome, google-chrome ...).
func restartsBrowser(s oswStep) bool {
	argv, ok := stepArgv(s)
	if !ok {
		return false
	}
	switch {
	case len(argv) == 2 && (argv[0] == "pkill" || argv[0] == "killall") && (argv[1] == "chrome" || argv[1] == "chromium"):
		return true
	case len(argv) >= 1 && (argv[0] == "google-chrome" || argv[0] == "chromium"):
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "--remote-debugging-port=") {
				return false
			}
		}
		return true
	}
	return false
}

// beforeScore is the task's before_score: Chromium closed when a getter
// reads its profile or OSWorld restarts it before scoring.
func (c *conv) beforeScore() []SetupStep {
	if !c.closeBrowser {
		return nil
	}
	return []SetupStep{{Browser: &Browser{Close: true}}}
}

// metricRules refuses a metric whose rule type the library does not read.
func (c *conv) metricRules(metric string, expected map[string]any) {
	rules, _ := expected["rules"].(map[string]any)
	typ, _ := rules["type"].(string)
	switch metric {
	case "is_expected_bookmarks":
		if typ != "bookmark_bar_folders_names" && typ != "bookmark_bar_websites_urls" {
			c.e.refuse(RefuseMetric, metric+":"+typ)
		}
	case "check_font_size":
		if typ != "value" && typ != "range" {
			c.e.refuse(RefuseMetric, metric+":"+typ)
		}
	case "check_qt_slider_colours":
		switch typ {
		case "blackish":
		case "match":
			if v, _ := rules["expected_qt_slider_colours"].(string); v == vlcSliderColours {
				c.e.refuse(RefuseUnsound, metric+": VLC's default colours, which a clean state already has")
			}
		default:
			c.e.refuse(RefuseMetric, metric+":"+typ)
		}
	case "check_config_status":
		key, _ := rules["key"].(string)
		val, _ := rules["value"].(string)
		if d, ok := gimprcDefaults[key]; ok && d == val {
			// GIMP writes only what differs from its defaults to gimprc:
			// a default value is never on a line the metric could match.
			c.e.refuse(RefuseUnsound, metric+": "+key+" "+val+" is GIMP's default, which it never writes to gimprc")
		}
	default:
		if d, ok := vlcrcBools[metric]; ok {
			v := pyStr(rules[d.rule])
			switch {
			case v == d.def:
				c.e.refuse(RefuseUnsound, metric+": "+v+" is VLC's default, which a clean state already has")
			case !d.ok(v):
				c.e.refuse(RefuseUnsound, metric+": VLC never writes "+v)
			}
		}
	}
}

// vlcSliderColours is VLC's default qt-slider-colours.
const vlcSliderColours = "153;210;153;20;210;20;255;199;15;245;39;29"

// vlcrcBools are the vlcrc metrics that compare one key with a rule's
// value: the rule's field, the value a vlcrc without the key reads as
// (OSWorld's default), and the values VLC can write for the key. A rule
// asking for the default passes on a clean state; one VLC cannot write
// fails on every state: both are unsound.
var vlcrcBools = map[string]struct {
	rule, def string
	ok        func(string) bool
}{
	"check_qt_bgcone":                           {"expected_qt_bgcone", "1", isBit},
	"check_qt_minimal_view":                     {"expected_qt_minimal_view", "0", isBit},
	"check_one_instance_when_started_from_file": {"expected_one_instance_when_started_from_file", "1", isBit},
	"check_global_key_play_pause":               {"expected_global_key_play_pause", "0", isBit},
	"check_qt_max_volume": {"expected_qt_max_volume", "125", func(v string) bool {
		n, err := strconv.Atoi(v)
		return err == nil && n >= 60 && n <= 300 && strconv.Itoa(n) == v
	}},
}

func isBit(v string) bool { return v == "0" || v == "1" }

// pyStr is the string OSWorld's metrics compare a rule's value as: an
// int becomes its digits, a string stays.
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return strconv.FormatInt(int64(x), 10)
		}
	}
	return fmt.Sprint(v)
}

// gimprcDefaults are GIMP 2.10's defaults for the gimprc keys OSWorld's
// tasks check, as check_config_status reads them.
var gimprcDefaults = map[string]string{
	"theme":       `"Dark"`,
	"undo-levels": "5",
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
	case "vlc_config":
		// OSWorld reads ~/.config/vlc/vlcrc on Linux; VLC keeps it 0600,
		// so guestd hands it to the verifier ($SK_APPS).
		if !c.vlc {
			c.e.refuse(RefuseGetter, typ+" without VLC")
		}
	case "gimp_config_file":
		name, _ := g["file_name"].(string)
		if name == "" || name != path.Base(name) || name == "." || name == ".." || strings.ContainsAny(name, "\x00\n\\") {
			c.e.refuse(RefusePath, "~/.config/GIMP/2.10/"+name)
			return out
		}
		out["path"] = "~/.config/GIMP/2.10/" + name
		if !c.apps["gimp"] {
			c.e.refuse(RefuseGetter, typ+" without GIMP")
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
		switch {
		case browserGetters[typ]:
			if !c.chromium {
				c.e.refuse(RefuseGetter, typ+" without the browser")
			}
			c.closeBrowser = true
			c.e.note("getter %s reads Chromium's profile: before_score closes Chromium", typ)
		case unsoundGetters[typ] != "":
			c.e.refuse(RefuseUnsound, typ+": "+unsoundGetters[typ])
		default:
			c.e.refuse(RefuseGetter, typ)
		}
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
