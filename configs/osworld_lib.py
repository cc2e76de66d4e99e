# The OSWorld metric library (docs/osworld.md): the importer puts this file
# into every imported task's verifier, followed by the task's evaluator spec.
# It scores what OSWorld's evaluator would, from the frozen sandbox: getters
# fetch the states (the agent's files through the verifier library's safe
# reader, $SK_GUESTD check read; commands bounded in time and output; the
# expected files the importer embedded), metrics compare them, and conj
# combines several metrics. It prints exactly one number.
import base64
import difflib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

MAX_BYTES = 1 << 20  # the most a getter returns (the safe reader's bound)
CMD_SECONDS = float(os.environ.get("SK_OSWORLD_CMD_SECONDS", "20"))  # a command getter's time (tests shorten it)
# All the getters' commands share one budget, well inside the verifier's own
# limit: a state the agent left that hangs each command (a FIFO where a
# command reads) scores 0, never a verifier cut off (a scorer error, an
# episode dropped and retried for free).
_DEADLINE = time.monotonic() + float(os.environ.get("SK_OSWORLD_BUDGET_SECONDS", "40"))


def _left():
    """Seconds a command may still run: its own bound within what is left
    of the budget (0: none left)."""
    return max(0.0, min(CMD_SECONDS, _DEADLINE - time.monotonic()))


class Missing(Exception):
    """A getter could not produce its state (OSWorld: FileNotFoundError)."""


_n = [0]


def _local(name, data):
    # A getter hands a metric a path, as OSWorld's do: a file in the
    # verifier's own directory, never the agent's.
    _n[0] += 1
    base = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(name or "file"))[:80]
    p = os.path.join(os.getcwd(), "osw_%d_%s" % (_n[0], base))
    with open(p, "wb") as f:
        f.write(data)
    return p


def agent_path(p):
    # The importer writes the agent's paths as ~/REST.
    if p == "~":
        return os.environ["AGENT_HOME"]
    if p.startswith("~/"):
        return os.path.join(os.environ["AGENT_HOME"], p[2:])
    raise Missing("not a path in the agent's home: %r" % p)


def read_agent(p):
    """The bytes of the agent's regular file p, or None: the safe reader
    refuses a link, a FIFO, a directory, a file over its bound."""
    g = os.environ.get("SK_GUESTD", "")
    if _left() <= 0:
        return None
    try:
        r = subprocess.run([g, "check", "bytes", agent_path(p)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=_left())
    except (OSError, subprocess.SubprocessError, Missing):
        return None
    if r.returncode != 0 or len(r.stdout) > MAX_BYTES:
        return None
    return r.stdout


def _files(cfg):
    if cfg.get("multi"):
        return list(cfg["path"]), list(cfg.get("dest") or cfg["path"])
    return [cfg["path"]], [cfg.get("dest") or cfg["path"]]


def _gives(cfg, out):
    gives = set(cfg.get("gives", [0]))
    got = [p for i, p in enumerate(out) if i in gives]
    return got[0] if len(got) == 1 else got


def get_vm_file(cfg):
    paths, dests = _files(cfg)
    out = []
    for p, d in zip(paths, dests):
        b = read_agent(p)
        out.append(None if b is None else _local(d, b))
    return _gives(cfg, out)


def get_cloud_file(cfg):
    paths, dests = _files(cfg)
    out = []
    for p, d in zip(paths, dests):
        f = SPEC["files"][p]
        b = base64.b64decode(f["b64"])
        if hashlib.sha256(b).hexdigest() != f["sha256"]:
            raise RuntimeError("embedded file %s does not match its sha256" % d)
        out.append(_local(d, b))
    return _gives(cfg, out)


def get_rule(cfg):
    return cfg["rules"]


def run_bounded(cmd):
    """stdout of sh -c cmd, run as the verifier in its own directory, or
    None if it runs past CMD_SECONDS (or the budget's end) or writes more
    than MAX_BYTES."""
    limit = _left()
    if limit <= 0:
        return None
    try:
        p = subprocess.Popen(["/bin/sh", "-c", cmd], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        return None
    killed = []

    def kill():
        killed.append(1)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
    t = threading.Timer(limit, kill)
    t.start()
    buf = bytearray()
    try:
        while True:
            chunk = p.stdout.read1(65536)
            if not chunk:
                break
            buf += chunk
            if len(buf) > MAX_BYTES:
                kill()
                break
    finally:
        p.stdout.close()
        p.wait()
        t.cancel()
        try:
            os.killpg(p.pid, signal.SIGKILL)  # what it left running
        except OSError:
            pass
    if killed:
        return None
    return buf.decode("utf-8", "replace")


def get_vm_command_line(cfg):
    return run_bounded(cfg["command"])


def _profile(name):
    """Chromium's profile file name as guestd handed it to the verifier
    ($SK_BROWSER, after before_score closed the browser), parsed as JSON;
    {} when it is missing or malformed (a browser that never wrote it)."""
    d = os.environ.get("SK_BROWSER")
    if not d:
        return {}
    try:
        with open(os.path.join(d, name), "rb") as f:
            b = f.read(MAX_BYTES + 1)
        v = json.loads(b) if len(b) <= MAX_BYTES else {}
    except (OSError, ValueError):
        return {}
    return v if isinstance(v, dict) else {}


def _dict(v):
    return v if isinstance(v, dict) else {}


def get_enable_do_not_track(cfg):
    return "true" if _profile("Preferences").get("enable_do_not_track") else "false"


def get_enable_enhanced_safety_browsing(cfg):
    return "true" if _dict(_profile("Preferences").get("safebrowsing")).get("enhanced") else "false"


def get_profile_name(cfg):
    return _dict(_profile("Preferences").get("profile")).get("name")


def get_bookmarks(cfg):
    return _dict(_profile("Bookmarks").get("roots")) or []


def get_chrome_font_size(cfg):
    # OSWorld's getter: the profile's web preferences, or Chrome's defaults
    # when none is set.
    prefs = _dict(_dict(_profile("Preferences").get("webkit")).get("webprefs"))
    return prefs or {"default_fixed_font_size": 13, "default_font_size": 16, "minimum_font_size": 13}


def get_gimp_config_file(cfg):
    """A file of GIMP's profile, at the path the importer wrote, read
    through the safe reader; None when it is missing or the reader refuses
    it (a link, a FIFO, a file over the bound), or empty (OSWorld's getter
    gives None for an empty file too)."""
    b = read_agent(cfg["path"])
    return _local(cfg.get("dest") or cfg["path"], b) if b else None


def get_vlc_config(cfg):
    """VLC's vlcrc, which VLC keeps private to the agent's user (0600):
    guestd hands it to the verifier in $SK_APPS (docs/architecture.md,
    "Before scoring"), read as the safe reader reads (a link, a FIFO, a
    file over the bound is left out); None when it is not there."""
    d = os.environ.get("SK_APPS")
    if not d:
        return None
    try:
        with open(os.path.join(d, "vlcrc"), "rb") as f:
            b = f.read(MAX_BYTES + 1)
    except OSError:
        return None
    return None if len(b) > MAX_BYTES else _local(cfg.get("dest") or "vlcrc", b)


GETTERS = {
    "vm_file": get_vm_file,
    "cloud_file": get_cloud_file,
    "rule": get_rule,
    "vm_command_line": get_vm_command_line,
    "enable_do_not_track": get_enable_do_not_track,
    "enable_enhanced_safety_browsing": get_enable_enhanced_safety_browsing,
    "profile_name": get_profile_name,
    "bookmarks": get_bookmarks,
    "chrome_font_size": get_chrome_font_size,
    "vlc_config": get_vlc_config,
    "gimp_config_file": get_gimp_config_file,
}


def _text(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def exact_match(result, rules):
    return 1.0 if result == rules["expected"] else 0.0


def check_include_exclude(result, rules):
    if result is None:
        return 0.0
    inc, exc = rules.get("include", []), rules.get("exclude", [])
    return 1.0 if all(r in result for r in inc) and all(r not in result for r in exc) else 0.0


def is_in_list(result, rules):
    return 1.0 if rules["expected"] in result else 0.0


def literal_match(result, expected, **options):
    kind = options.get("type", "str")
    fold = options.get("ignore_case", False)
    if kind == "str":
        a, b = str(result), str(expected)
        return float(a.lower() == b.lower() if fold else a == b)
    if kind == "list":
        if not isinstance(result, (list, tuple)) or not isinstance(expected, (list, tuple)) or len(result) != len(expected):
            return 0.0
        a = [str(s).lower() if fold else str(s) for s in result]
        b = [str(s).lower() if fold else str(s) for s in expected]
        return float(a == b)
    raise ValueError("literal_match: type %r" % kind)


def _lcs(a, b):
    if len(a) < len(b):
        a, b = b, a
    prev = [0] * (len(b) + 1)
    for ca in a:
        cur = [0]
        for j, cb in enumerate(b):
            cur.append(prev[j] + 1 if ca == cb else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def fuzzy_match(result, rules):
    # The normalized indel similarity (OSWorld's fuzz.ratio / 100): twice
    # the longest common subsequence over the total length.
    a, b = str(result), str(rules["expected"])
    if not a and not b:
        return 1.0
    if len(a) * len(b) > 25_000_000:
        return 0.0
    return 2.0 * _lcs(a, b) / (len(a) + len(b))


def check_direct_json_object(result, rules):
    try:
        if isinstance(result, str):
            result = json.loads(result.strip().replace("'", '"'))
        if result is None:
            return 0.0
        exp = rules["expected"]
        if not rules.get("expect_in_result", False):
            return 1.0 if all(exp.get(k) == result.get(k) for k in exp) else 0.0
        for k, v in exp.items():
            got = result.get(k)
            if isinstance(v, list):
                if not (isinstance(got, list) and any(x in got for x in v)):
                    return 0.0
            elif isinstance(v, str):
                if v not in got:
                    return 0.0
            else:
                return 0.0
        return 1.0
    except Exception:
        return 0.0


def compare_text_file(actual, expected, **options):
    if not actual:
        return 0.0
    a, b = _text(actual), _text(expected)
    if options.get("ignore_blanks", False):
        a = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", a).strip())
        b = re.sub(r"\s+", " ", re.sub(r"[\t\n]", " ", b).strip())
    if options.get("ignore_case", False):
        a, b = a.lower(), b.lower()
    return 1.0 if a == b else 0.0


def diff_text_file(result, expect):
    if result is None:
        return 0.0
    return difflib.SequenceMatcher(a=_text(result).splitlines(), b=_text(expect).splitlines()).ratio()


def compare_csv(result, expected, **options):
    if result is None:
        return 0.0
    a, b = _text(result).splitlines(), _text(expected).splitlines()
    if not options.get("strict", True):
        a, b = [x.strip() for x in a], [x.strip() for x in b]
    if options.get("ignore_case", False):
        a, b = [x.lower() for x in a], [x.lower() for x in b]
    return float(a == b)


def file_contains(path, config):
    if not path:
        return 0.0
    t = _text(path)
    return 1.0 if all(x in t for x in config["expected"]) else 0.0


def check_list(result, rules):
    if result is None:
        return 0.0
    want = [re.compile(p) for p in rules.get("expect", [])]
    bad = [re.compile(p) for p in rules.get("unexpect", [])]
    seen = [False] * len(want)
    clean = True
    for line in _text(result).splitlines(keepends=True):
        for i, r in enumerate(want):
            seen[i] = seen[i] or r.search(line) is not None
        clean = clean and all(r.search(line) is None for r in bad)
    return float(all(seen) and clean)


def is_expected_bookmarks(bookmarks, rule):
    if not bookmarks:
        return 0.0
    bar = [b for b in bookmarks["bookmark_bar"]["children"] if isinstance(b, dict)]
    if rule["type"] == "bookmark_bar_folders_names":
        return float({b.get("name") for b in bar if b.get("type") == "folder"} == set(rule["names"]))
    if rule["type"] == "bookmark_bar_websites_urls":
        return float({b.get("url") for b in bar if b.get("type") == "url"} == set(rule["urls"]))
    raise ValueError("rule type %r" % rule["type"])


def check_font_size(font_size, rule):
    size = font_size["default_font_size"]
    if rule["type"] == "value":
        return float(size == rule["value"])
    if rule["type"] == "range":
        return float(rule["min"] < size < rule["max"])
    raise ValueError("rule type %r" % rule["type"])


def _utf8_lines(path):
    # OSWorld's vlcrc metrics decode the file as UTF-8 (bytes that are not
    # raise, which scores 0 here) and split it at newlines.
    with open(path, "rb") as f:
        return f.read().decode("utf-8").split("\n")


def _vlcrc_value(path, key, default):
    """The value of vlcrc's key as OSWorld's metrics read it: the text
    after the last '=' of the last line holding "key=", a line commented
    out by VLC (a default it writes as "#key=value") included; default
    when no line holds it."""
    v = default
    for line in _utf8_lines(path):
        if key + "=" in line:
            v = line.split("=")[-1].strip()
    return v


def _rule_str(v):
    # OSWorld compares an int rule as its digits.
    return str(v) if isinstance(v, int) else v


def _vlcrc_metric(key, field, default):
    def metric(path, rule):
        return float(_vlcrc_value(path, key, default) == _rule_str(rule[field]))
    return metric


check_qt_bgcone = _vlcrc_metric("qt-bgcone", "expected_qt_bgcone", "1")
check_qt_max_volume = _vlcrc_metric("qt-max-volume", "expected_qt_max_volume", "125")
check_qt_minimal_view = _vlcrc_metric("qt-minimal-view", "expected_qt_minimal_view", "0")
check_one_instance_when_started_from_file = _vlcrc_metric(
    "one-instance-when-started-from-file", "expected_one_instance_when_started_from_file", "1")


def check_global_key_play_pause(path, rule):
    # Set (1) when the last global-key-play-pause line has a key after '='.
    v = _vlcrc_value(path, "global-key-play-pause", "")
    return float(("0" if v == "" else "1") == _rule_str(rule["expected_global_key_play_pause"]))


def check_qt_slider_colours(path, rule):
    # OSWorld matches the key without its '=' (any line naming it).
    v = "153;210;153;20;210;20;255;199;15;245;39;29"
    for line in _utf8_lines(path):
        if "qt-slider-colours" in line:
            v = line.split("=")[-1].strip()
    if rule["type"] == "match":
        return float(v == rule["expected_qt_slider_colours"])
    if rule["type"] == "blackish":
        n = [int(x) for x in v.split(";")]
        return float(all(c < 100 for rgb in zip(n[0::3], n[1::3], n[2::3]) for c in rgb))
    raise ValueError("rule type %r" % rule["type"])


def is_vlc_recordings_folder(path, rule):
    """The first uncommented line naming input-record-path decides: its
    value must be the rule's folder. OSWorld's VM home is /home/user; the
    same folder under the agent's home is the same answer (the sandbox's
    /home/user, where it exists, is a link to it)."""
    want = rule["recording_file_path"]
    ok = {want}
    home = os.environ.get("AGENT_HOME", "")
    if home and (want == "/home/user" or want.startswith("/home/user/")):
        ok.add(home.rstrip("/") + want[len("/home/user"):])
    for line in _utf8_lines(path):
        if line.startswith("#") or not line.strip():
            continue
        if "input-record-path" in line:
            return float(line.split("=")[-1].strip() in ok)
    return 0.0


def check_config_status(path, rule):
    """GIMP's config file as OSWorld reads it: each line that is not a
    comment or empty, its parentheses stripped from the ends, split at
    blanks; 1 when a line's first word is the key (or its first two the
    key's two words) and its last word the value."""
    if path is None:
        return 0.0
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
    key, want = rule["key"], rule["value"]
    for line in lines:
        if line.startswith("#") or line == "\n":
            continue
        items = line.strip().lstrip("(").rstrip(")\n").split()
        if isinstance(key, str):
            if items[0] == key and items[-1] == want:
                return 1.0
        elif isinstance(key, list) and len(key) == 2:
            if items[0] == key[0] and items[1] == key[1] and items[-1] == want:
                return 1.0
    return 0.0


METRICS = {
    "exact_match": exact_match,
    "check_include_exclude": check_include_exclude,
    "is_in_list": is_in_list,
    "literal_match": literal_match,
    "fuzzy_match": fuzzy_match,
    "check_direct_json_object": check_direct_json_object,
    "compare_text_file": compare_text_file,
    "diff_text_file": diff_text_file,
    "compare_csv": compare_csv,
    "file_contains": file_contains,
    "check_list": check_list,
    "is_expected_bookmarks": is_expected_bookmarks,
    "check_font_size": check_font_size,
    "check_qt_bgcone": check_qt_bgcone,
    "check_qt_max_volume": check_qt_max_volume,
    "check_qt_minimal_view": check_qt_minimal_view,
    "check_qt_slider_colours": check_qt_slider_colours,
    "check_one_instance_when_started_from_file": check_one_instance_when_started_from_file,
    "check_global_key_play_pause": check_global_key_play_pause,
    "is_vlc_recordings_folder": is_vlc_recordings_folder,
    "check_config_status": check_config_status,
}


def _one(metric, result_cfg, expected_cfg, options):
    try:
        result = GETTERS[result_cfg["type"]](result_cfg)
    except Missing:
        return None
    expected = GETTERS[expected_cfg["type"]](expected_cfg) if expected_cfg else None
    try:
        if expected is not None:
            return float(METRICS[metric](result, expected, **options))
        return float(METRICS[metric](result, **options))
    except (OSError, TypeError, KeyError, IndexError, ValueError, AttributeError, re.error):
        # OSWorld's metric would raise on a missing or malformed state: the
        # agent's work is wrong, not the scorer.
        return 0.0


def score(spec, ended):
    """OSWorld's DesktopEnv.evaluate over the spec, with ended the way the
    episode ended (done, fail, or empty when the budget ran out)."""
    if spec["func"] == "infeasible":
        return 1.0 if ended == "fail" else 0.0
    if ended == "fail":
        return 0.0
    opts = spec.get("options") or {}
    if isinstance(spec["func"], list):
        conj = spec.get("conj", "and")
        results = []
        for i, m in enumerate(spec["func"]):
            exp = spec.get("expected")
            v = _one(m, spec["result"][i], exp[i] if exp else None, opts[i] if isinstance(opts, list) and i < len(opts) else {})
            if v is None:
                if conj == "and":
                    return 0.0
                v = 0.0
            if conj == "and" and v == 0.0:
                return 0.0
            if conj == "or" and v == 1.0:
                return 1.0
            results.append(v)
        return sum(results) / len(results) if conj == "and" else max(results)
    v = _one(spec["func"], spec["result"], spec.get("expected"), opts)
    return 0.0 if v is None else v


def main():
    v = score(SPEC, os.environ.get("SK_ENDED", ""))
    v = min(1.0, max(0.0, v))
    sys.stdout.write("%s\n" % ("1" if v == 1.0 else "0" if v == 0.0 else repr(v)))
