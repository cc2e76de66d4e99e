package configs

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/guest"
)

// The generated verifiers run here with Debian's python3, and read the
// agent's files through the real verifier library: this test binary,
// re-run as `guestd check`.
func TestMain(m *testing.M) {
	if os.Getenv("SK_TEST_AS_GUESTD") == "1" && len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(guest.CheckMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

const testPython = "/usr/bin/python3"

// fakeGuestd is a script that runs this test binary as guestd.
func fakeGuestd(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "guestd")
	script := "#!/bin/sh\nSK_TEST_AS_GUESTD=1 exec " + ShellQuote(self) + " \"$@\"\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// runSpec runs the verifier of spec (an evaluator spec as the importer
// writes it) with home as the agent's home and ended as SK_ENDED.
func runSpec(t *testing.T, spec map[string]any, home, ended string, env ...string) string {
	t.Helper()
	if _, err := os.Stat(testPython); err != nil {
		t.Skip("no " + testPython)
	}
	if spec["files"] == nil {
		spec["files"] = map[string]any{}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(testPython, filepath.Join(bin, "python3")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", osworldVerifier(b))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "AGENT_HOME=" + home, "SK_GUESTD=" + fakeGuestd(t), "SK_ENDED=" + ended, "HOME=" + cmd.Dir, "SK_OSWORLD_CMD_SECONDS=3", "SK_OSWORLD_BUDGET_SECONDS=5"}
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	// The verifier's own limit, as the server sets one: the getters' budget
	// (5 s) ends well inside it.
	cmd.WaitDelay = time.Second
	timer := time.AfterFunc(8*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	if err := cmd.Run(); err != nil {
		t.Fatalf("verifier: %v\n%s", err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

func rule(v any) map[string]any { return map[string]any{"type": "rule", "rules": v} }

func cmdLine(c string) map[string]any { return map[string]any{"type": "vm_command_line", "command": c} }

func vmFile(p string) map[string]any {
	return map[string]any{"type": "vm_file", "path": p, "dest": "x"}
}

func cloud(name string, data []byte) (map[string]any, map[string]any) {
	sum := sha256.Sum256(data)
	url := "https://example.invalid/" + name
	return map[string]any{"type": "cloud_file", "path": url, "dest": name},
		map[string]any{url: map[string]string{"sha256": hex.EncodeToString(sum[:]), "b64": base64.StdEncoding.EncodeToString(data)}}
}

func TestOSWorldMetrics(t *testing.T) {
	home := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(home, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "Hello World\nline two\n")
	write("case.txt", "HELLO world\nLINE two\n")
	write("list.txt", "alpha 1\nbeta 2\n")
	write("table.csv", "name,qty\napple,3\n")
	write("blanks.txt", "Hello   World line\ttwo")
	goldText, goldFiles := cloud("gold.txt", []byte("Hello World\nline two\n"))
	goldCSV, csvFiles := cloud("gold.csv", []byte("name,qty\napple,3\n"))

	type c struct {
		name  string
		spec  map[string]any
		ended string
		want  string
	}
	cases := []c{
		{"infeasible fail", map[string]any{"func": "infeasible"}, "fail", "1"},
		{"infeasible done", map[string]any{"func": "infeasible"}, "done", "0"},
		{"infeasible budget", map[string]any{"func": "infeasible"}, "", "0"},
		{"fail scores 0", map[string]any{"func": "exact_match", "result": cmdLine("echo hi"), "expected": rule(map[string]any{"expected": "hi\n"})}, "fail", "0"},
		{"exact_match", map[string]any{"func": "exact_match", "result": cmdLine("echo hi"), "expected": rule(map[string]any{"expected": "hi\n"})}, "done", "1"},
		{"exact_match wrong", map[string]any{"func": "exact_match", "result": cmdLine("echo ho"), "expected": rule(map[string]any{"expected": "hi\n"})}, "done", "0"},
		{"command sees the agent's home", map[string]any{"func": "exact_match", "result": cmdLine(`[ -f "$AGENT_HOME/a.txt" ] && echo yes`), "expected": rule(map[string]any{"expected": "yes\n"})}, "done", "1"},
		{"command timeout", map[string]any{"func": "check_include_exclude", "result": cmdLine("echo x; sleep 60"), "expected": rule(map[string]any{"include": []string{"x"}})}, "done", "0"},
		{"commands share one budget", map[string]any{"func": []string{"check_include_exclude", "check_include_exclude", "check_include_exclude", "check_include_exclude"}, "conj": "or",
			"result":   []any{cmdLine("echo x; sleep 60"), cmdLine("echo x; sleep 60"), cmdLine("echo x; sleep 60"), cmdLine("echo x; sleep 60")},
			"expected": []any{rule(map[string]any{"include": []string{"x"}}), rule(map[string]any{"include": []string{"x"}}), rule(map[string]any{"include": []string{"x"}}), rule(map[string]any{"include": []string{"x"}})}}, "done", "0"},
		{"command floods", map[string]any{"func": "check_include_exclude", "result": cmdLine("yes"), "expected": rule(map[string]any{"include": []string{"y"}})}, "done", "0"},
		{"include_exclude", map[string]any{"func": "check_include_exclude", "result": cmdLine("echo found spotify"), "expected": rule(map[string]any{"include": []string{"spotify"}, "exclude": []string{"not found"}})}, "done", "1"},
		{"include_exclude excluded", map[string]any{"func": "check_include_exclude", "result": cmdLine("echo spotify not found"), "expected": rule(map[string]any{"include": []string{"spotify"}, "exclude": []string{"not found"}})}, "done", "0"},
		{"is_in_list", map[string]any{"func": "is_in_list", "result": rule([]string{"a", "b"}), "expected": rule(map[string]any{"expected": "b"})}, "done", "1"},
		{"is_in_list absent", map[string]any{"func": "is_in_list", "result": rule([]string{"a", "b"}), "expected": rule(map[string]any{"expected": "c"})}, "done", "0"},
		{"literal_match", map[string]any{"func": "literal_match", "result": cmdLine("printf ABC"), "expected": rule("abc"), "options": map[string]any{"ignore_case": true}}, "done", "1"},
		{"literal_match case", map[string]any{"func": "literal_match", "result": cmdLine("printf ABC"), "expected": rule("abc")}, "done", "0"},
		{"literal_match list", map[string]any{"func": "literal_match", "result": rule([]string{"a", "B"}), "expected": rule([]string{"a", "b"}), "options": map[string]any{"type": "list", "ignore_case": true}}, "done", "1"},
		{"fuzzy_match exact", map[string]any{"func": "fuzzy_match", "result": cmdLine("printf kitten"), "expected": rule(map[string]any{"expected": "kitten"})}, "done", "1"},
		// indel: LCS(kitten, sitting) = 4 ("ittn"): 8/13.
		{"fuzzy_match partial", map[string]any{"func": "fuzzy_match", "result": cmdLine("printf kitten"), "expected": rule(map[string]any{"expected": "sitting"})}, "done", "0.6153846153846154"},
		{"json object", map[string]any{"func": "check_direct_json_object", "result": cmdLine(`echo "{'a': 1, 'b': 'x'}"`), "expected": rule(map[string]any{"expected": map[string]any{"a": 1}})}, "done", "1"},
		{"json object wrong", map[string]any{"func": "check_direct_json_object", "result": cmdLine(`echo '{"a": 2}'`), "expected": rule(map[string]any{"expected": map[string]any{"a": 1}})}, "done", "0"},
		{"json object not json", map[string]any{"func": "check_direct_json_object", "result": cmdLine(`echo nope`), "expected": rule(map[string]any{"expected": map[string]any{"a": 1}})}, "done", "0"},
		{"json object in result", map[string]any{"func": "check_direct_json_object", "result": cmdLine(`echo '{"a": ["x", "y"], "b": "hello"}'`), "expected": rule(map[string]any{"expect_in_result": true, "expected": map[string]any{"a": []string{"y"}, "b": "ell"}})}, "done", "1"},
		{"compare_text_file", map[string]any{"func": "compare_text_file", "result": vmFile("~/a.txt"), "expected": goldText, "files": goldFiles}, "done", "1"},
		{"compare_text_file case", map[string]any{"func": "compare_text_file", "result": vmFile("~/case.txt"), "expected": goldText, "files": goldFiles}, "done", "0"},
		{"compare_text_file ignore_case", map[string]any{"func": "compare_text_file", "result": vmFile("~/case.txt"), "expected": goldText, "files": goldFiles, "options": map[string]any{"ignore_case": true}}, "done", "1"},
		{"compare_text_file ignore_blanks", map[string]any{"func": "compare_text_file", "result": vmFile("~/blanks.txt"), "expected": goldText, "files": goldFiles, "options": map[string]any{"ignore_blanks": true}}, "done", "1"},
		{"compare_text_file missing", map[string]any{"func": "compare_text_file", "result": vmFile("~/none.txt"), "expected": goldText, "files": goldFiles}, "done", "0"},
		{"compare_csv", map[string]any{"func": "compare_csv", "result": vmFile("~/table.csv"), "expected": goldCSV, "files": csvFiles}, "done", "1"},
		{"compare_csv wrong", map[string]any{"func": "compare_csv", "result": vmFile("~/list.txt"), "expected": goldCSV, "files": csvFiles}, "done", "0"},
		{"diff_text_file", map[string]any{"func": "diff_text_file", "result": vmFile("~/a.txt"), "expected": goldText, "files": goldFiles}, "done", "1"},
		{"diff_text_file half", map[string]any{"func": "diff_text_file", "result": vmFile("~/case.txt"), "expected": goldText, "files": goldFiles}, "done", "0"},
		{"file_contains", map[string]any{"func": "file_contains", "result": vmFile("~/a.txt"), "expected": rule(map[string]any{"expected": []string{"World", "two"}})}, "done", "1"},
		{"file_contains absent", map[string]any{"func": "file_contains", "result": vmFile("~/a.txt"), "expected": rule(map[string]any{"expected": []string{"three"}})}, "done", "0"},
		{"check_list", map[string]any{"func": "check_list", "result": vmFile("~/list.txt"), "expected": rule(map[string]any{"expect": []string{`^beta \d`}, "unexpect": []string{"gamma"}})}, "done", "1"},
		{"check_list unexpected", map[string]any{"func": "check_list", "result": vmFile("~/list.txt"), "expected": rule(map[string]any{"expect": []string{"beta"}, "unexpect": []string{"alpha"}})}, "done", "0"},
		{"conj and", map[string]any{"func": []string{"exact_match", "is_in_list"}, "conj": "and",
			"result": []any{cmdLine("echo hi"), rule([]string{"a"})}, "expected": []any{rule(map[string]any{"expected": "hi\n"}), rule(map[string]any{"expected": "a"})}}, "done", "1"},
		{"conj and one fails", map[string]any{"func": []string{"exact_match", "is_in_list"}, "conj": "and",
			"result": []any{cmdLine("echo hi"), rule([]string{"a"})}, "expected": []any{rule(map[string]any{"expected": "hi\n"}), rule(map[string]any{"expected": "z"})}}, "done", "0"},
		{"conj or one passes", map[string]any{"func": []string{"exact_match", "is_in_list"}, "conj": "or",
			"result": []any{cmdLine("echo ho"), rule([]string{"a"})}, "expected": []any{rule(map[string]any{"expected": "hi\n"}), rule(map[string]any{"expected": "a"})}}, "done", "1"},
		{"conj or none", map[string]any{"func": []string{"exact_match", "is_in_list"}, "conj": "or",
			"result": []any{cmdLine("echo ho"), rule([]string{"a"})}, "expected": []any{rule(map[string]any{"expected": "hi\n"}), rule(map[string]any{"expected": "z"})}}, "done", "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := runSpec(t, tc.spec, home, tc.ended); got != tc.want {
				t.Errorf("reward %q, want %q", got, tc.want)
			}
		})
	}
}

// The browser getters read the profile files guestd hands the verifier in
// $SK_BROWSER (Preferences, Bookmarks): what they must score, and what a
// missing, malformed, oversized or odd-shaped file scores (0, never a
// scorer error).
func TestOSWorldBrowserGetters(t *testing.T) {
	home := t.TempDir()
	profile := func(t *testing.T, files map[string]string) string {
		d := t.TempDir()
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return "SK_BROWSER=" + d
	}
	exact := func(getter, want string) map[string]any {
		return map[string]any{"func": "exact_match", "result": map[string]any{"type": getter}, "expected": rule(map[string]any{"expected": want})}
	}
	folders := map[string]any{"func": "is_expected_bookmarks", "result": map[string]any{"type": "bookmarks"},
		"expected": rule(map[string]any{"type": "bookmark_bar_folders_names", "names": []string{"Favorites"}})}
	font := map[string]any{"func": "check_font_size", "result": map[string]any{"type": "chrome_font_size"},
		"expected": rule(map[string]any{"type": "range", "min": 16, "max": 99999})}
	bar := func(children string) string {
		return `{"roots": {"bookmark_bar": {"children": ` + children + `}, "other": {"children": []}}}`
	}
	huge := `{"enable_do_not_track": true, "pad": "` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name  string
		spec  map[string]any
		files map[string]string // nil: no $SK_BROWSER at all
		want  string
	}{
		{"do not track on", exact("enable_do_not_track", "true"), map[string]string{"Preferences": `{"enable_do_not_track": true}`}, "1"},
		{"do not track off", exact("enable_do_not_track", "true"), map[string]string{"Preferences": `{"enable_do_not_track": false}`}, "0"},
		{"do not track, a fresh profile", exact("enable_do_not_track", "true"), map[string]string{"Preferences": `{"profile": {"name": "Your Chromium"}}`}, "0"},
		{"no profile handed over", exact("enable_do_not_track", "true"), nil, "0"},
		{"preferences missing", exact("enable_do_not_track", "true"), map[string]string{"Bookmarks": bar("[]")}, "0"},
		{"preferences malformed", exact("enable_do_not_track", "true"), map[string]string{"Preferences": `{"enable_do_not_track": tr`}, "0"},
		{"preferences a list", exact("enable_do_not_track", "true"), map[string]string{"Preferences": `[true]`}, "0"},
		{"preferences oversized", exact("enable_do_not_track", "true"), map[string]string{"Preferences": huge}, "0"},
		{"enhanced protection", exact("enable_enhanced_safety_browsing", "true"), map[string]string{"Preferences": `{"safebrowsing": {"enhanced": true}}`}, "1"},
		{"standard protection", exact("enable_enhanced_safety_browsing", "true"), map[string]string{"Preferences": `{"safebrowsing": {"enabled": true}}`}, "0"},
		{"safebrowsing not an object", exact("enable_enhanced_safety_browsing", "true"), map[string]string{"Preferences": `{"safebrowsing": "enhanced"}`}, "0"},
		{"profile name", exact("profile_name", "Thomas"), map[string]string{"Preferences": `{"profile": {"name": "Thomas"}}`}, "1"},
		{"profile name wrong", exact("profile_name", "Thomas"), map[string]string{"Preferences": `{"profile": {"name": "Tom"}}`}, "0"},
		{"profile not an object", exact("profile_name", "Thomas"), map[string]string{"Preferences": `{"profile": "Thomas"}`}, "0"},
		{"bookmark folder", folders, map[string]string{"Bookmarks": bar(`[{"type": "folder", "name": "Favorites", "children": []}]`)}, "1"},
		{"bookmark folder misnamed", folders, map[string]string{"Bookmarks": bar(`[{"type": "folder", "name": "Favourites", "children": []}]`)}, "0"},
		{"bookmark folder and another", folders, map[string]string{"Bookmarks": bar(`[{"type": "folder", "name": "Favorites"}, {"type": "folder", "name": "x"}]`)}, "0"},
		{"bookmark, not a folder", folders, map[string]string{"Bookmarks": bar(`[{"type": "url", "name": "Favorites", "url": "http://a.test/"}]`)}, "0"},
		{"bookmarks without a bar", folders, map[string]string{"Bookmarks": `{"roots": {"other": {"children": []}}}`}, "0"},
		{"bookmarks children not a list", folders, map[string]string{"Bookmarks": bar(`"Favorites"`)}, "0"},
		{"no bookmarks file", folders, map[string]string{}, "0"},
		{"font size largest", font, map[string]string{"Preferences": `{"webkit": {"webprefs": {"default_font_size": 72}}}`}, "1"},
		{"font size default", font, map[string]string{"Preferences": `{"webkit": {"webprefs": {"default_font_size": 16}}}`}, "0"},
		{"font size never set", font, map[string]string{"Preferences": `{}`}, "0"},
		{"font size not a number", font, map[string]string{"Preferences": `{"webkit": {"webprefs": {"default_font_size": "72"}}}`}, "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.files != nil {
				env = append(env, profile(t, tc.files))
			}
			if got := runSpec(t, tc.spec, home, "done", env...); got != tc.want {
				t.Errorf("reward %q, want %q", got, tc.want)
			}
		})
	}
}

// ts0 loads the tasks an import wrote.
func ts0(t *testing.T, dir string) map[string]*Task {
	t.Helper()
	ts, err := LoadTasks(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// The vm_file getter reads through the safe reader: a link, a FIFO, a
// directory or a file over its bound scores 0 and never hangs.
func TestOSWorldVMFileHostile(t *testing.T) {
	home := t.TempDir()
	target := filepath.Join(t.TempDir(), "gold.txt")
	if err := os.WriteFile(target, []byte("Hello World\nline two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(home, "link.txt")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(home, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(home, "dir.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("Hello World\n"), (2<<20)/12)
	if err := os.WriteFile(filepath.Join(home, "big.txt"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	gold, files := cloud("gold.txt", []byte("Hello World\nline two\n"))
	for _, name := range []string{"link.txt", "fifo.txt", "dir.txt", "big.txt"} {
		for _, metric := range []string{"compare_text_file", "file_contains"} {
			spec := map[string]any{"func": metric, "result": vmFile("~/" + name), "expected": gold, "files": files}
			if metric == "file_contains" {
				spec["expected"] = rule(map[string]any{"expected": []string{"Hello"}})
			}
			if got := runSpec(t, spec, home, "done"); got != "0" {
				t.Errorf("%s on %s: reward %q, want 0", metric, name, got)
			}
		}
	}
	// The same file, regular, passes: the refusals above are the reader's.
	if err := os.WriteFile(filepath.Join(home, "plain.txt"), []byte("Hello World\nline two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := runSpec(t, map[string]any{"func": "compare_text_file", "result": vmFile("~/plain.txt"), "expected": gold, "files": files}, home, "done"); got != "1" {
		t.Errorf("plain file: reward %q, want 1", got)
	}
}

// A cloud file whose embedded bytes do not match their hash fails the
// verifier (a scorer error), never a reward.
func TestOSWorldCloudFileHash(t *testing.T) {
	gold, files := cloud("gold.txt", []byte("x"))
	for _, f := range files {
		f.(map[string]string)["b64"] = base64.StdEncoding.EncodeToString([]byte("y"))
	}
	spec := map[string]any{"func": "compare_text_file", "result": rule(nil), "expected": gold, "files": files}
	b, _ := json.Marshal(spec)
	cmd := exec.Command("/bin/sh", "-c", osworldVerifier(b))
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=/usr/bin:/bin", "AGENT_HOME=" + t.TempDir(), "SK_ENDED=done"}
	if out, err := cmd.Output(); err == nil {
		t.Fatalf("verifier succeeded with %q on a tampered file", out)
	}
}

func TestMapHomeInShell(t *testing.T) {
	for _, c := range []struct{ in, v, want string }{
		{"ls /home/user/Desktop", "HOME", `ls "$HOME"/Desktop`},
		{"cat '/home/user/a b'", "HOME", `cat ''"$HOME"'/a b'`},
		{`cat "/home/user/a b"`, "HOME", `cat "${HOME}/a b"`},
		{"ls /home/users", "HOME", "ls /home/users"},
		{"[ -d ~/Desktop/x ] && echo ok", "AGENT_HOME", `[ -d "$AGENT_HOME"/Desktop/x ] && echo ok`},
		{"echo '~/x' a~b", "AGENT_HOME", "echo '~/x' a~b"},
		{`ls $HOME/x "${HOME}/y" '$HOME' $HOMER`, "AGENT_HOME", `ls $AGENT_HOME/x "${AGENT_HOME}/y" '$HOME' $HOMER`},
		{`ls $HOME/x`, "HOME", `ls $HOME/x`},
		{`echo \'/home/user`, "HOME", `echo \'"$HOME"`},
	} {
		if got := mapHomeInShell(c.in, c.v); got != c.want {
			t.Errorf("mapHomeInShell(%q, %s) = %q, want %q", c.in, c.v, got, c.want)
		}
		// What sh makes of it: the home path, whatever the quoting.
		if c.v == "HOME" && strings.Contains(c.in, "/home/user/") {
			out, err := exec.Command("/bin/sh", "-c", "HOME=/h; set -- "+mapHomeInShell(c.in, c.v)+`; shift; printf '%s|' "$@"`).Output()
			if err != nil || !strings.Contains(string(out), "/h/") {
				t.Errorf("%q under sh: %q %v", c.in, out, err)
			}
		}
	}
}

func TestShellPrograms(t *testing.T) {
	for _, c := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"which spotify", "which", true},
		{"export X=1\ngsettings get a b", "export gsettings", true},
		{"echo 'password' | sudo -S mkdir ~/x", "echo sudo", true},
		{"[ -f a ] && echo 'File exists.' || echo no", "[ echo echo", true},
		{"A=1 B=2 ls -l; cd /tmp && cat x", "ls cd cat", true},
		{"echo $(date)", "echo date", true},
		{"for f in *; do echo $f; done", "", false},
		{"echo `date`", "", false},
		{"cat <<EOF\nx\nEOF", "", false},
		{"echo 'unbalanced", "", false},
		{"$CMD arg", "", false},
	} {
		got, ok := shellPrograms(c.in)
		if ok != c.ok || (ok && strings.Join(got, " ") != c.want) {
			t.Errorf("shellPrograms(%q) = %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestHomeRel(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"/home/user/Desktop/a.txt", "Desktop/a.txt", true},
		{"/home/user", "", true},
		{"~/x", "x", true},
		{"/home/user/../etc/passwd", "", false},
		{"/home/user/a/../../b", "", false},
		{"/etc/passwd", "", false},
		{"relative.txt", "", false},
		{"/home/username/x", "", false},
	} {
		got, ok := homeRel(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("homeRel(%q) = %q %v, want %q %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestUUID5URL(t *testing.T) {
	// uuid.uuid5(uuid.NAMESPACE_URL, "http://python.org/")
	if got := uuid5URL("http://python.org/"); got != "4c565f0d-3f5a-5890-b41b-20cf47701c5e" {
		t.Errorf("uuid5URL = %s", got)
	}
}

// The importer over a small examples directory: what imports, each
// refusal's reason, the cache and its hash, and that nothing is written
// outside --out.
func TestImportOSWorld(t *testing.T) {
	ex, cache, out := t.TempDir(), t.TempDir(), t.TempDir()
	put := func(dom, id string, task map[string]any) {
		task["id"] = id
		if task["instruction"] == nil {
			task["instruction"] = "Do it in /home/user/Desktop."
		}
		b, _ := json.Marshal(task)
		if err := os.MkdirAll(filepath.Join(ex, dom), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ex, dom, id+".json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	click := map[string]any{"type": "execute", "parameters": map[string]any{"command": []string{"python", "-c", "import pyautogui; import time; pyautogui.click(960, 540); time.sleep(0.5);"}}}
	put("os", "ok-cmd", map[string]any{"related_apps": []string{"os"}, "config": []any{click,
		map[string]any{"type": "execute", "parameters": map[string]any{"command": "mkdir -p /home/user/Desktop/a", "shell": true}},
		map[string]any{"type": "activate_window", "parameters": map[string]any{"window_name": "x"}}},
		"evaluator": map[string]any{"func": "exact_match", "result": cmdLine("[ -d /home/user/Desktop/b ] && echo yes"), "expected": rule(map[string]any{"expected": "yes\n"})}})
	put("os", "infeasible", map[string]any{"related_apps": []string{"os"}, "config": []any{}, "evaluator": map[string]any{"func": "infeasible"}})
	put("os", "sudo", map[string]any{"related_apps": []string{"os"}, "config": []any{},
		"evaluator": map[string]any{"func": "exact_match", "result": cmdLine("echo password | sudo -S ls"), "expected": rule(map[string]any{"expected": "x"})}})
	put("os", "metric", map[string]any{"related_apps": []string{"os"}, "config": []any{},
		"evaluator": map[string]any{"func": "is_utc_0", "result": cmdLine("date")}})
	put("os", "getter", map[string]any{"related_apps": []string{"os"}, "config": []any{},
		"evaluator": map[string]any{"func": "exact_match", "result": map[string]any{"type": "vm_terminal_output"}, "expected": rule(map[string]any{"expected": "x"})}})
	put("thunderbird", "app", map[string]any{"related_apps": []string{"thunderbird"}, "config": []any{}, "evaluator": map[string]any{"func": "infeasible"}})
	// VLC and GIMP tasks scored from their config files: OSWorld's restart
	// of VLC and GIMP's ctrl+q before reading gimprc are dropped (both
	// write those files as their Preferences are saved); a rule asking for
	// VLC's default is unsound; sessionrc is written only as GIMP quits.
	restartVLC := []any{map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"pkill", "vlc"}}},
		map[string]any{"type": "launch", "parameters": map[string]any{"command": "vlc"}}}
	quitGIMP := []any{map[string]any{"type": "execute", "parameters": map[string]any{"command": []string{"python3", "-c", `import pyautogui; pyautogui.hotkey(["ctrl", "q"]);`}}},
		map[string]any{"type": "sleep", "parameters": map[string]any{"seconds": 0.5}}}
	vlcLaunch := []any{map[string]any{"type": "launch", "parameters": map[string]any{"command": "vlc"}}, click}
	put("vlc", "vlc-ok", map[string]any{"related_apps": []string{"vlc"}, "config": vlcLaunch,
		"evaluator": map[string]any{"func": "check_qt_bgcone", "postconfig": restartVLC, "result": map[string]any{"type": "vlc_config", "dest": "vlcrc"},
			"expected": rule(map[string]any{"expected_qt_bgcone": 0})}})
	put("vlc", "vlc-default", map[string]any{"related_apps": []string{"vlc"}, "config": vlcLaunch,
		"evaluator": map[string]any{"func": "check_qt_max_volume", "postconfig": restartVLC, "result": map[string]any{"type": "vlc_config", "dest": "vlcrc"},
			"expected": rule(map[string]any{"expected_qt_max_volume": 125})}})
	gimpLaunch := []any{map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"gimp"}}}}
	put("gimp", "gimp-rc", map[string]any{"related_apps": []string{"gimp"}, "config": gimpLaunch,
		"evaluator": map[string]any{"func": "check_config_status", "postconfig": quitGIMP, "result": map[string]any{"type": "gimp_config_file", "file_name": "gimprc", "dest": "gimprc"},
			"expected": rule(map[string]any{"type:": "key-value", "key": "theme", "value": `"Light"`})}})
	put("gimp", "gimp-session", map[string]any{"related_apps": []string{"gimp"}, "config": gimpLaunch,
		"evaluator": map[string]any{"func": "check_config_status", "postconfig": quitGIMP, "result": map[string]any{"type": "gimp_config_file", "file_name": "sessionrc", "dest": "sessionrc"},
			"expected": rule(map[string]any{"type:": "key-value", "key": "hide-docks", "value": "yes"})}})
	put("chrome", "net", map[string]any{"related_apps": []string{"chrome"}, "config": []any{
		map[string]any{"type": "chrome_open_tabs", "parameters": map[string]any{"urls_to_open": []string{"https://www.example.com/"}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	put("os", "pymod", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "execute", "parameters": map[string]any{"command": []string{"python", "-c", "import pptx; print(1)"}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	put("os", "post", map[string]any{"related_apps": []string{"os"}, "config": []any{},
		"evaluator": map[string]any{"func": "exact_match", "postconfig": []any{click}, "result": cmdLine("echo"), "expected": rule(map[string]any{"expected": "x"})}})
	put("os", "escape", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "download", "parameters": map[string]any{"files": []any{map[string]any{"url": "https://x.invalid/a.txt", "path": "/home/user/../../etc/a.txt"}}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	put("os", "nocache", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "download", "parameters": map[string]any{"files": []any{map[string]any{"url": "https://x.invalid/gone.txt", "path": "/home/user/gone.txt"}}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	// A download and a cloud file found in the cache, by task id and name.
	if err := os.MkdirAll(filepath.Join(cache, "cached"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "cached", "notes.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cache, "cached", "notes_gold.txt"), []byte("final\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	put("libreoffice_writer", "cached", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "download", "parameters": map[string]any{"files": []any{map[string]any{"url": "https://drive.invalid/download?id=1", "path": "/home/user/Desktop/notes.txt"}}}},
		map[string]any{"type": "open", "parameters": map[string]any{"path": "/home/user/Desktop/notes.txt"}}},
		"evaluator": map[string]any{"func": "compare_text_file", "result": map[string]any{"type": "vm_file", "path": "/home/user/Desktop/notes.txt", "dest": "notes.txt"},
			"expected": map[string]any{"type": "cloud_file", "path": "https://drive.invalid/download?id=2", "dest": "notes_gold.txt"}}})
	// Chrome launched as OSWorld does (its DevTools port, socat) and a tab
	// on an offline web app.
	put("chrome", "tabs", map[string]any{"related_apps": []string{"chrome"}, "config": []any{
		map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"google-chrome", "--remote-debugging-port=1337"}}},
		map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"socat", "tcp-listen:9222,fork", "tcp:localhost:1337"}}},
		map[string]any{"type": "chrome_open_tabs", "parameters": map[string]any{"urls_to_open": []string{"http://shop.test/"}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	put("multi_apps", "editor", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "launch", "parameters": map[string]any{"command": "mousepad /home/user/Desktop/a.txt"}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	// Chrome's profile read after a restart (postconfig), a getter this
	// Chromium makes unsound, a rule the bookmarks metric does not read;
	// sudo mkdir and pyautogui's terminal shortcut in a setup.
	chrome := []any{map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"google-chrome", "--remote-debugging-port=1337"}}}}
	put("chrome", "prefs", map[string]any{"related_apps": []string{"chrome"}, "config": chrome,
		"evaluator": map[string]any{"func": "exact_match", "result": map[string]any{"type": "profile_name"}, "expected": rule(map[string]any{"expected": "Thomas"}),
			"postconfig": []any{map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"pkill", "chrome"}}},
				map[string]any{"type": "launch", "parameters": map[string]any{"command": []string{"google-chrome", "--remote-debugging-port=1337"}}}}}})
	put("chrome", "unsound", map[string]any{"related_apps": []string{"chrome"}, "config": chrome,
		"evaluator": map[string]any{"func": "exact_match", "result": map[string]any{"type": "data_delete_automacally"}, "expected": rule(map[string]any{"expected": "true"})}})
	put("chrome", "liked", map[string]any{"related_apps": []string{"chrome"}, "config": chrome,
		"evaluator": map[string]any{"func": "is_expected_bookmarks", "result": map[string]any{"type": "bookmarks"}, "expected": rule(map[string]any{"type": "liked_authors_websites_urls", "urls": []string{}})}})
	put("os", "sudo-mkdir", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "execute", "parameters": map[string]any{"command": "echo 'password' | sudo -S mkdir ~/Desktop/a", "shell": true}},
		map[string]any{"type": "execute", "parameters": map[string]any{"command": []string{"python", "-c", "import pyautogui; import time; time.sleep(0.5); pyautogui.click(960, 540); time.sleep(0.5); pyautogui.hotkey('ctrl', 'alt', 't'); time.sleep(0.5)"}}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	put("os", "sudo-rm", map[string]any{"related_apps": []string{"os"}, "config": []any{
		map[string]any{"type": "execute", "parameters": map[string]any{"command": "echo 'password' | sudo -S rm -rf /tmp/x; mkdir ~/a", "shell": true}}},
		"evaluator": map[string]any{"func": "infeasible"}})
	// An id that would climb out of --out.
	put("os", "x", map[string]any{"related_apps": []string{"os"}, "config": []any{}, "evaluator": map[string]any{"func": "infeasible"}})
	b, _ := os.ReadFile(filepath.Join(ex, "os", "x.json"))
	b = bytes.Replace(b, []byte(`"id":"x"`), []byte(`"id":"../../evil"`), 1)
	if err := os.WriteFile(filepath.Join(ex, "os", "x.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}

	rep, err := ImportOSWorld(OSWorldOptions{Examples: ex, Cache: cache, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range rep.Tasks {
		if e.Task != "" {
			got[e.ID] = "imported"
		} else {
			got[e.ID] = e.Refused[0].String()
		}
	}
	want := map[string]string{
		"ok-cmd": "imported", "infeasible": "imported", "cached": "imported", "../../evil": "imported", "tabs": "imported", "editor": "imported",
		"sudo": "missing_program sudo", "metric": "unsupported_metric is_utc_0", "getter": "unsupported_getter vm_terminal_output",
		"app": "unsupported_app thunderbird", "net": "needs_network www.example.com", "pymod": "needs_python_module pptx",
		"post": "unsupported_config postconfig:execute", "escape": "outside_home /home/user/../../etc/a.txt",
		"nocache": "missing_cache_file gone.txt", "prefs": "imported", "sudo-mkdir": "imported",
		"unsound": "unsound_verifier " + "data_delete_automacally: " + unsoundGetters["data_delete_automacally"],
		"liked":   "unsupported_metric is_expected_bookmarks:liked_authors_websites_urls", "sudo-rm": "missing_program sudo",
		"vlc-ok": "imported", "gimp-rc": "imported",
		"vlc-default":  "unsound_verifier check_qt_max_volume: 125 is VLC's default, which a clean state already has",
		"gimp-session": "unsupported_config postconfig:quit gimp (it writes sessionrc only as it quits)",
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}
	if rep.Imported != 10 || rep.Domains["os"].Imported != 4 || rep.Domains["os"].Refused[RefuseProgram] != 2 {
		t.Errorf("counts: %+v %+v", rep, rep.Domains["os"])
	}
	names, _ := filepath.Glob(filepath.Join(out, "*"))
	if len(names) != 10 {
		t.Errorf("written: %v", names)
	}
	// VLC starts from a seeded vlcrc (its first-run dialog answered) and
	// waits for its window; neither task acts before scoring.
	if v := ts0(t, out)["osworld-vlc-ok"]; v == nil || len(v.Setup) != 2 || !strings.Contains(v.Setup[1].Exec.Shell, "qt-privacy-ask=0") ||
		len(v.InstanceSetup) != 2 || v.InstanceSetup[0].LaunchApp.App != "vlc" || v.InstanceSetup[1].WaitWindow == nil || len(v.BeforeScore) != 0 ||
		strings.Join(v.Apps, ",") != "vlc" {
		t.Errorf("vlc-ok: %+v", v)
	}
	if g := ts0(t, out)["osworld-gimp-rc"]; g == nil || len(g.InstanceSetup) != 2 || g.InstanceSetup[0].LaunchApp.App != "gimp" || len(g.BeforeScore) != 0 {
		t.Errorf("gimp-rc: %+v", g)
	}
	if p := ts0(t, out)["osworld-prefs"]; p == nil || len(p.BeforeScore) != 1 || p.BeforeScore[0].Browser == nil || !p.BeforeScore[0].Browser.Close {
		t.Errorf("prefs: before_score %+v; want the browser closed", p)
	}
	if m := ts0(t, out)["osworld-sudo-mkdir"]; m == nil || len(m.InstanceSetup) != 1 || m.InstanceSetup[0].Exec.Shell != `mkdir ~/Desktop/a` ||
		strings.Join(m.Apps, ",") != "xterm" {
		t.Errorf("sudo-mkdir: %+v", m)
	}
	if _, err := os.Stat(filepath.Join(out, "osworld-evil.json")); err != nil {
		t.Errorf("the climbing id is not sanitized: %v", err)
	}
	ts, err := LoadTasks(out)
	if err != nil {
		t.Fatal(err)
	}
	ok := ts["osworld-ok-cmd"]
	if ok == nil || ok.Instruction != "Do it in ~/Desktop." || !ok.AllowShell || len(ok.InstanceSetup) != 1 || ok.InstanceSetup[0].Exec.Shell != `mkdir -p "$HOME"/Desktop/a` {
		t.Errorf("ok-cmd: %+v", ok)
	}
	tabs := ts["osworld-tabs"]
	if tabs == nil || len(tabs.InstanceSetup) != 3 || tabs.InstanceSetup[0].LaunchApp.App != "chromium" || len(tabs.InstanceSetup[0].LaunchApp.Args) != 0 ||
		tabs.InstanceSetup[2].Browser == nil || tabs.InstanceSetup[2].Browser.Open[0] != "http://shop.test/" {
		t.Errorf("tabs: %+v", tabs)
	}
	if ed := ts["osworld-editor"]; ed == nil || len(ed.InstanceSetup) != 1 || ed.InstanceSetup[0].LaunchApp.App != "mousepad" ||
		strings.Join(ed.InstanceSetup[0].LaunchApp.Args, " ") != "Desktop/a.txt" || strings.Join(ed.Apps, ",") != "mousepad,xterm" {
		t.Errorf("editor: %+v", ed)
	}
	c := ts["osworld-cached"]
	if c == nil || len(c.InstanceSetup) != 4 {
		t.Fatalf("cached: %+v", c)
	}
	pf, sum := c.InstanceSetup[0].PutFile, sha256.Sum256([]byte("draft\n"))
	if pf == nil || pf.Path != "~/Desktop/notes.txt" || !strings.Contains(c.InstanceSetup[1].Exec.Shell, hex.EncodeToString(sum[:])) {
		t.Errorf("cached download: %+v %+v", pf, c.InstanceSetup[1].Exec)
	}
	if la := c.InstanceSetup[2].LaunchApp; la == nil || la.App != "mousepad" || la.Args[len(la.Args)-1] != "Desktop/notes.txt" {
		t.Errorf("cached open: %+v", la)
	}
	// The download's hash check passes in a shell, and fails on other bytes.
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "Desktop"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Desktop", "notes.txt"), []byte("draft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := exec.Command("/bin/sh", "-c", c.InstanceSetup[1].Exec.Shell)
	check.Dir = dir
	if out, err := check.CombinedOutput(); err != nil {
		t.Errorf("sha256 check: %v %s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "Desktop", "notes.txt"), []byte("other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check = exec.Command("/bin/sh", "-c", c.InstanceSetup[1].Exec.Shell)
	check.Dir = dir
	if err := check.Run(); err == nil {
		t.Error("sha256 check passed on other bytes")
	}
	// The cached task's verifier: the gold file came from the cache.
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "Desktop"), 0o755); err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]string{"final\n": "1", "draft\n": "0"} {
		if err := os.WriteFile(filepath.Join(home, "Desktop", "notes.txt"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("/bin/sh", "-c", c.Verifier.Shell)
		cmd.Dir = t.TempDir()
		cmd.Env = []string{"PATH=/usr/bin:/bin", "AGENT_HOME=" + home, "SK_GUESTD=" + fakeGuestd(t), "SK_ENDED=done"}
		o, err := cmd.Output()
		if err != nil || strings.TrimSpace(string(o)) != want {
			t.Errorf("cached verifier on %q: %q %v, want %s", text, o, err, want)
		}
	}
	var sb strings.Builder
	rep.WriteText(&sb)
	if !strings.Contains(sb.String(), "10 imported, 14 refused") {
		t.Errorf("report:\n%s", sb.String())
	}
}

// VLC's and GIMP's config getters and metrics: vlcrc as guestd hands it
// over ($SK_APPS), GIMP's files read from the agent's home through the
// safe reader. Each metric scores 1 on the setting, 0 on VLC's or GIMP's
// default and on anything else; a missing, malformed, linked, FIFO or
// oversized file scores 0, never a scorer error.
func TestOSWorldAppConfigs(t *testing.T) {
	home := t.TempDir()
	gimpDir := filepath.Join(home, ".config", "GIMP", "2.10")
	if err := os.MkdirAll(gimpDir, 0o755); err != nil {
		t.Fatal(err)
	}
	vlcrc := func(t *testing.T, text string) string {
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, "vlcrc"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return "SK_APPS=" + d
	}
	vlc := func(metric string, rules map[string]any) map[string]any {
		return map[string]any{"func": metric, "result": map[string]any{"type": "vlc_config", "dest": "vlcrc"}, "expected": rule(rules)}
	}
	// What VLC writes: every option, the defaults commented out.
	full := "[qt] # Qt interface\n#qt-minimal-view=0\n#qt-bgcone=1\n#qt-max-volume=125\n#qt-slider-colours=153;210;153;20;210;20;255;199;15;245;39;29\n" +
		"[core]\n#one-instance-when-started-from-file=1\n#global-key-play-pause=\n# Record directory or filename (string)\n#input-record-path=\n"
	// with is full with key set to val, as VLC writes a changed option.
	with := func(key, val string) string {
		lines := strings.Split(full, "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "#"+key+"=") {
				lines[i] = key + "=" + val
			}
		}
		return strings.Join(lines, "\n")
	}
	cone := vlc("check_qt_bgcone", map[string]any{"expected_qt_bgcone": 0})
	vol := vlc("check_qt_max_volume", map[string]any{"expected_qt_max_volume": 200})
	minimal := vlc("check_qt_minimal_view", map[string]any{"expected_qt_minimal_view": 1})
	black := vlc("check_qt_slider_colours", map[string]any{"type": "blackish"})
	match := vlc("check_qt_slider_colours", map[string]any{"type": "match", "expected_qt_slider_colours": "1;2;3"})
	one := vlc("check_one_instance_when_started_from_file", map[string]any{"expected_one_instance_when_started_from_file": 0})
	key := vlc("check_global_key_play_pause", map[string]any{"expected_global_key_play_pause": 1})
	rec := vlc("is_vlc_recordings_folder", map[string]any{"recording_file_path": "/home/user/Desktop"})
	cases := []struct {
		name  string
		spec  map[string]any
		vlcrc *string // nil: no $SK_APPS at all
		want  string
	}{
		{"cone off", cone, ptr(with("qt-bgcone", "0")), "1"},
		{"cone default", cone, ptr(full), "0"},
		{"cone, the seeded vlcrc", cone, ptr("[qt]\nqt-privacy-ask=0\n"), "0"},
		{"cone, no vlcrc handed over", cone, nil, "0"},
		{"cone, vlcrc oversized", cone, ptr(with("qt-bgcone", "0") + strings.Repeat("#", 1<<20)), "0"},
		{"cone, vlcrc not UTF-8", cone, ptr(with("qt-bgcone", "0") + "\xff\xfe"), "0"},
		{"max volume 200", vol, ptr(with("qt-max-volume", "200")), "1"},
		{"max volume 150", vol, ptr(with("qt-max-volume", "150")), "0"},
		{"max volume default", vol, ptr(full), "0"},
		{"minimal view on", minimal, ptr(with("qt-minimal-view", "1")), "1"},
		{"minimal view default", minimal, ptr(full), "0"},
		{"slider blackish", black, ptr(with("qt-slider-colours", "20;20;20;30;30;30;40;40;40;50;50;50")), "1"},
		{"slider one bright", black, ptr(with("qt-slider-colours", "20;20;20;30;30;30;40;40;40;245;39;29")), "0"},
		{"slider default", black, ptr(full), "0"},
		{"slider not numbers", black, ptr(with("qt-slider-colours", "black")), "0"},
		{"slider match", match, ptr(with("qt-slider-colours", "1;2;3")), "1"},
		{"slider no match", match, ptr(with("qt-slider-colours", "1;2;4")), "0"},
		{"one instance off", one, ptr(with("one-instance-when-started-from-file", "0")), "1"},
		{"one instance default", one, ptr(full), "0"},
		{"global key set", key, ptr(with("global-key-play-pause", "Space")), "1"},
		{"global key default", key, ptr(full), "0"},
		{"recordings folder", rec, ptr(with("input-record-path", "/home/user/Desktop")), "1"},
		{"recordings folder, the agent's home", rec, ptr(with("input-record-path", home+"/Desktop")), "1"},
		{"recordings folder elsewhere", rec, ptr(with("input-record-path", "/home/user/Documents")), "0"},
		{"recordings folder ~", rec, ptr(with("input-record-path", "~/Desktop")), "0"},
		{"recordings folder default", rec, ptr(full), "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var env []string
			if tc.vlcrc != nil {
				env = append(env, vlcrc(t, *tc.vlcrc))
			}
			if got := runSpec(t, tc.spec, home, "done", env...); got != tc.want {
				t.Errorf("reward %q, want %q", got, tc.want)
			}
		})
	}
	// A solved vlcrc scores 0 when the agent ended with fail.
	if got := runSpec(t, cone, home, "fail", vlcrc(t, with("qt-bgcone", "0"))); got != "0" {
		t.Errorf("cone off, ended with fail: %q", got)
	}

	gimp := func(file string, key any, value string) map[string]any {
		return map[string]any{"func": "check_config_status",
			"result":   map[string]any{"type": "gimp_config_file", "file_name": file, "dest": file, "path": "~/.config/GIMP/2.10/" + file},
			"expected": rule(map[string]any{"type:": "key-value", "key": key, "value": value})}
	}
	theme := gimp("gimprc", "theme", `"Light"`)
	undo := gimp("gimprc", "undo-levels", "100")
	hist := gimp("action-history", []string{"history-item", `"filters-vignette"`}, "1")
	put := func(t *testing.T, name string, plant func(p string) error) {
		p := filepath.Join(gimpDir, name)
		os.RemoveAll(p)
		if err := plant(p); err != nil {
			t.Fatal(err)
		}
	}
	text := func(s string) func(p string) error {
		return func(p string) error { return os.WriteFile(p, []byte(s), 0o644) }
	}
	target := filepath.Join(t.TempDir(), "gimprc")
	if err := os.WriteFile(target, []byte("(theme \"Light\")\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gcases := []struct {
		name  string
		spec  map[string]any
		file  string
		plant func(p string) error
		want  string
	}{
		{"theme Light", theme, "gimprc", text("# GIMP gimprc\n\n(theme \"Light\")\n(undo-levels 5)\n"), "1"},
		{"theme Gray", theme, "gimprc", text("# GIMP gimprc\n\n(theme \"Gray\")\n"), "0"},
		{"theme never set", theme, "gimprc", text("# GIMP gimprc\n\n(default-view\n    (show-menubar yes))\n"), "0"},
		{"theme commented", theme, "gimprc", text("# (theme \"Light\")\n"), "0"},
		{"undo 100", undo, "gimprc", text("(undo-levels 100)\n"), "1"},
		{"undo 50", undo, "gimprc", text("(undo-levels 50)\n"), "0"},
		{"a blank line before it (OSWorld's metric raises)", theme, "gimprc", text("   \n(theme \"Light\")\n"), "0"},
		{"history item", hist, "action-history", text("(history-item \"filters-vignette\" 1)\n"), "1"},
		{"history item, other action", hist, "action-history", text("(history-item \"filters-blur\" 1)\n"), "0"},
		{"empty gimprc", theme, "gimprc", text(""), "0"},
		{"no gimprc", theme, "gimprc", func(string) error { return nil }, "0"},
		{"gimprc a link", theme, "gimprc", func(p string) error { return os.Symlink(target, p) }, "0"},
		{"gimprc a FIFO", theme, "gimprc", func(p string) error { return syscall.Mkfifo(p, 0o644) }, "0"},
		{"gimprc a directory", theme, "gimprc", func(p string) error { return os.Mkdir(p, 0o755) }, "0"},
		{"gimprc oversized", theme, "gimprc", text("(theme \"Light\")\n" + strings.Repeat("# pad\n", (2<<20)/6)), "0"},
	}
	for _, tc := range gcases {
		t.Run(tc.name, func(t *testing.T) {
			put(t, tc.file, tc.plant)
			if got := runSpec(t, tc.spec, home, "done"); got != tc.want {
				t.Errorf("reward %q, want %q", got, tc.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }
