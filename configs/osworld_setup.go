package configs

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// Config steps: an OSWorld task's related apps and its config list become
// the task's apps, setup and instance steps (docs/osworld.md, "What a task
// becomes").

// relatedApps maps the task's related_apps to the apps it may launch, and
// refuses the apps the sandbox image does not ship.
func (c *conv) relatedApps() {
	for _, a := range c.t.RelatedApps {
		switch strings.ReplaceAll(strings.ToLower(strings.TrimSpace(a)), " ", "_") {
		case "chrome", "browser":
			c.apps["chromium"] = true
		case "os", "terminal":
			c.apps["xterm"] = true
			c.shell = true
		case "libreoffice_calc", "calc", "libreoffice_writer", "writer", "libreoffice":
			c.apps["libreoffice"] = true
		case "pdf":
			c.apps["mupdf"] = true
		case "image":
			c.apps["feh"] = true
		case "vlc":
			c.vlcApp()
		case "gimp":
			c.apps["gimp"] = true
		default:
			c.e.refuse(RefuseApp, a)
		}
	}
	if c.apps["xterm"] {
		c.setup = append(c.setup,
			SetupStep{LaunchApp: &LaunchApp{App: "xterm", Args: []string{"-geometry", "100x30+0+0"}}},
			SetupStep{WaitWindow: &WaitWindow{Match: "xterm", TimeoutMS: 10000}})
		c.e.note("a terminal (xterm) is open from the start, as OSWorld's desktop offers one")
	}
}

func rawString(m map[string]json.RawMessage, k string) (string, bool) {
	var s string
	if v, ok := m[k]; ok && json.Unmarshal(v, &s) == nil {
		return s, true
	}
	return "", false
}

// command reads a step's or getter's command: a string (run by a shell) or
// an argv list.
func command(m map[string]json.RawMessage) (argv []string, shell string, ok bool) {
	v, has := m["command"]
	if !has {
		return nil, "", false
	}
	if json.Unmarshal(v, &shell) == nil {
		return nil, shell, true
	}
	if json.Unmarshal(v, &argv) == nil && len(argv) > 0 {
		return argv, "", true
	}
	return nil, "", false
}

func (c *conv) step(s oswStep) {
	p := s.Parameters
	switch s.Type {
	case "launch":
		argv, sh, ok := command(p)
		if !ok {
			c.e.refuse(RefuseConfig, "launch without a command")
			return
		}
		if argv == nil {
			argv = strings.Fields(sh)
		}
		c.launch(argv)
	case "open":
		f, ok := rawString(p, "path")
		if !ok {
			c.e.refuse(RefuseConfig, "open without a path")
			return
		}
		c.open(f)
	case "download":
		c.download(p)
	case "execute", "command":
		argv, sh, ok := command(p)
		if !ok {
			c.e.refuse(RefuseConfig, s.Type+" without a command")
			return
		}
		if isFocusClick(argv) {
			c.e.note("dropped: a pyautogui click that focuses the desktop")
			return
		}
		if opensTerminal(argv) {
			// OSWorld opens its terminal with ctrl+alt+t; the sandbox's
			// is a launched xterm.
			if !c.apps["xterm"] {
				c.apps["xterm"] = true
				c.setup = append(c.setup, SetupStep{LaunchApp: &LaunchApp{App: "xterm"}})
			}
			c.e.note("pyautogui's ctrl+alt+t (open a terminal): an xterm")
			return
		}
		if m := sudoMkdir.FindStringSubmatch(sh); m != nil {
			// The sandbox has no sudo; the setup runs as the agent, who owns
			// the home. The directory is the agent's instead of root's.
			sh = m[1]
			c.e.note("sudo mkdir: mkdir as the agent (the directory is not root's)")
		}
		cmd, ok := c.shellCommand(argv, sh, "HOME")
		if !ok {
			return
		}
		c.instance = append(c.instance, SetupStep{Exec: &Exec{Shell: cmd, TimeoutMS: 30000}})
	case "sleep":
		var secs float64
		if v, ok := p["seconds"]; ok {
			_ = json.Unmarshal(v, &secs)
		}
		secs = min(max(secs, 0), 10)
		c.instance = append(c.instance, SetupStep{Exec: &Exec{Argv: []string{"sleep", fmt.Sprintf("%g", secs)}, TimeoutMS: 15000}})
	case "activate_window":
		c.e.note("dropped: activate_window (the settle after setup covers it)")
	case "chrome_open_tabs":
		var urls []string
		if v, ok := p["urls_to_open"]; ok {
			_ = json.Unmarshal(v, &urls)
		}
		var open []string
		for _, u := range urls {
			pu, err := url.Parse(u)
			if err != nil || pu.Scheme != "http" || !strings.HasSuffix(pu.Hostname(), ".test") {
				c.e.refuse(RefuseNetwork, hostOf(u))
				continue
			}
			open = append(open, u)
		}
		if len(open) > 0 {
			if !c.chromium {
				c.launch([]string{"chromium"})
			}
			c.instance = append(c.instance, SetupStep{Browser: &Browser{Open: open, TimeoutMS: 30000}})
		}
	case "googledrive", "login":
		c.e.refuse(RefuseNetwork, s.Type)
	default:
		c.e.refuse(RefuseConfig, s.Type)
	}
}

func hostOf(u string) string {
	if pu, err := url.Parse(u); err == nil && pu.Host != "" {
		return pu.Host
	}
	return u
}

// isFocusClick is OSWorld's usual first step, a pyautogui click in the
// middle of the screen (and a sleep) to focus the desktop.
func isFocusClick(argv []string) bool {
	if len(argv) != 3 || (argv[0] != "python" && argv[0] != "python3") || argv[1] != "-c" {
		return false
	}
	return focusClick.MatchString(strings.ReplaceAll(argv[2], " ", ""))
}

// opensTerminal is a pyautogui program that clicks, sleeps and presses
// ctrl+alt+t (GNOME's shortcut for a terminal), and nothing else.
func opensTerminal(argv []string) bool {
	if len(argv) != 3 || (argv[0] != "python" && argv[0] != "python3") || argv[1] != "-c" {
		return false
	}
	return terminalKeys.MatchString(strings.ReplaceAll(strings.ReplaceAll(argv[2], " ", ""), `"`, "'"))
}

var terminalKeys = regexp.MustCompile(`^importpyautogui;(importtime;)?(time\.sleep\([\d.]+\);|pyautogui\.click\(\d+,\d+\);)*pyautogui\.hotkey\('ctrl','alt','t'\);?(time\.sleep\([\d.]+\);?)?$`)

// sudoMkdir is `echo PASSWORD | sudo -S mkdir ...`, the one use of sudo
// in OSWorld's setups that the agent's own rights can do.
var sudoMkdir = regexp.MustCompile(`^\s*echo\s+(?:'[^']*'|"[^"]*"|\S+)\s*\|\s*sudo\s+-S\s+(mkdir\s[^;&|<>` + "`" + `$]*)$`)

var focusClick = regexp.MustCompile(`^importpyautogui;(importtime;)?pyautogui\.click\(\d+,\d+\);(time\.sleep\([\d.]+\);?)?$`)

// launch maps a launched program to an app Shinken ships.
func (c *conv) launch(argv []string) {
	prog := path.Base(argv[0])
	switch prog {
	case "google-chrome", "chromium", "chromium-browser":
		for _, a := range argv[1:] {
			if !strings.HasPrefix(a, "--") {
				c.e.refuse(RefuseNetwork, hostOf(a))
			}
		}
		c.apps["chromium"] = true
		c.chromium = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "chromium"}},
			SetupStep{WaitWindow: &WaitWindow{Match: "Chromium", TimeoutMS: 30000}})
		c.e.note("launch %s: Chromium, without OSWorld's flags (its DevTools port)", prog)
	case "socat":
		c.e.note("dropped: socat (OSWorld's forward to Chrome's DevTools port; Shinken drives Chromium over its own pipe)")
	case "libreoffice", "soffice":
		var file string
		var flags []string
		for _, a := range argv[1:] {
			switch {
			case a == "--calc" || a == "--writer":
				flags = append(flags, a)
			case strings.HasPrefix(a, "-"):
				c.e.refuse(RefuseConfig, "libreoffice "+a)
			case file == "":
				file = a
			default:
				c.e.refuse(RefuseConfig, "libreoffice with several files")
			}
		}
		c.libreoffice(file, flags)
	case "xterm", "gnome-terminal":
		c.apps["xterm"] = true
		c.shell = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "xterm", Args: []string{"-geometry", "100x30+0+0"}}},
			SetupStep{WaitWindow: &WaitWindow{Match: "xterm", TimeoutMS: 10000}})
	case "vlc":
		// VLC as OSWorld starts it: a start time and a file in the home
		// at most.
		c.vlcApp()
		var args []string
		file := false
		for _, a := range argv[1:] {
			rel, ok := homeRel(a)
			switch {
			case vlcTimeFlag.MatchString(a):
			case ok && rel != "" && strings.HasPrefix(a, "/") && !file:
				a, file = rel, true
			default:
				c.e.refuse(RefuseConfig, "vlc "+a)
				return
			}
			args = append(args, a)
		}
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "vlc", Args: args}},
			SetupStep{WaitWindow: &WaitWindow{Match: "VLC media player", TimeoutMS: 30000}})
	case "gimp":
		c.apps["gimp"] = true
		args := []string{}
		match := "GNU Image Manipulation Program"
		for _, a := range argv[1:] {
			rel, ok := homeRel(a)
			if !ok || rel == "" || strings.HasPrefix(a, "-") || len(args) > 0 {
				c.e.refuse(RefuseConfig, "gimp "+a)
				return
			}
			args = append(args, rel)
			match = "GIMP"
		}
		// GIMP shows its splash, and its first start in a fresh home
		// queries every plug-in: well over the usual wait on a loaded host.
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "gimp", Args: args}},
			SetupStep{WaitWindow: &WaitWindow{Match: match, TimeoutMS: 90000}})
		c.e.note("launch gimp: the setup waits for its window (its first start in a fresh home takes seconds)")
	case "mousepad", "pcmanfm", "galculator", "mupdf", "feh":
		// The other apps the image ships, started as OSWorld starts them;
		// a file argument in the home is mapped to the sandbox home.
		var args []string
		for _, a := range argv[1:] {
			if rel, ok := homeRel(a); ok && strings.HasPrefix(a, "/") {
				a = rel
				if a == "" {
					a = "."
				}
			} else if strings.HasPrefix(a, "/") {
				c.e.refuse(RefusePath, a)
				return
			}
			args = append(args, a)
		}
		c.apps[prog] = true
		c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: prog, Args: args}})
		c.e.note("launch %s: no window is waited for (the settle after setup covers it)", prog)
	default:
		c.e.refuse(RefuseApp, prog)
	}
}

var vlcTimeFlag = regexp.MustCompile(`^--(start|stop|run)-time=[0-9]+(\.[0-9]+)?$`)

// vlcSeed is the vlcrc a VLC task starts from: the first-run "Privacy
// and Network Access Policy" dialog already answered, as on OSWorld's VM
// image. Every other setting is VLC's default (OSWorld's metrics read an
// absent key as its default).
const vlcSeed = "[qt]\nqt-privacy-ask=0\n"

// vlcApp makes VLC one of the task's apps, its config seeded in setup.
func (c *conv) vlcApp() {
	if c.vlc {
		return
	}
	c.vlc = true
	c.apps["vlc"] = true
	c.setup = append(c.setup,
		SetupStep{Exec: &Exec{Shell: "mkdir -p ~/.config/vlc && printf '" + strings.ReplaceAll(vlcSeed, "\n", `\n`) + "' > ~/.config/vlc/vlcrc", TimeoutMS: 10000}})
	c.e.note("vlcrc is seeded with the first-run privacy dialog answered (qt-privacy-ask=0), as OSWorld's VM image has it")
}

// libreProfile is the LibreOffice profile the shipped office tasks use.
const libreProfile = "-env:UserInstallation=file:///home/agent/.config/libreoffice/4"

func (c *conv) libreoffice(file string, flags []string) {
	c.apps["libreoffice"] = true
	if !c.libre {
		c.libre = true
		// As the shipped office tasks: the golden initializes the profile.
		c.setup = append(c.setup,
			SetupStep{LaunchApp: &LaunchApp{App: "libreoffice", Args: []string{libreProfile, "--headless", "--terminate_after_init"}}},
			SetupStep{Exec: &Exec{Shell: "for i in $(seq 200); do pgrep -u $(id -u) soffice >/dev/null || exit 0; sleep 0.1; done; exit 1", TimeoutMS: 30000}})
	}
	args := append([]string{libreProfile}, flags...)
	match := "LibreOffice"
	if file != "" {
		rel, ok := homeRel(file)
		if !ok || rel == "" {
			c.e.refuse(RefusePath, file)
			return
		}
		args = append(args, rel)
		match = path.Base(rel)
	}
	c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: "libreoffice", Args: args}},
		SetupStep{WaitWindow: &WaitWindow{Match: match, TimeoutMS: 30000}})
}

// open opens a file in the app Shinken ships for its kind.
func (c *conv) open(file string) {
	rel, ok := homeRel(file)
	if !ok || rel == "" {
		c.e.refuse(RefusePath, file)
		return
	}
	switch ext := strings.ToLower(path.Ext(rel)); ext {
	case ".xlsx", ".xls", ".ods", ".fods", ".csv", ".docx", ".doc", ".odt", ".fodt", ".rtf":
		c.libreoffice(file, nil)
	case ".pptx", ".ppt", ".odp":
		c.e.refuse(RefuseApp, "libreoffice_impress")
	case ".pdf":
		c.app("mupdf", rel)
	case ".png", ".jpg", ".jpeg", ".gif", ".bmp", ".webp":
		c.app("feh", rel)
	case ".txt", ".md", ".py", ".json", ".sh", ".html", ".css", ".js", ".yaml", ".yml", ".ini", ".conf", ".log", ".tex":
		c.app("mousepad", rel)
	default:
		c.e.refuse(RefuseConfig, "open "+ext)
	}
}

func (c *conv) app(app, rel string) {
	c.apps[app] = true
	c.instance = append(c.instance, SetupStep{LaunchApp: &LaunchApp{App: app, Args: []string{rel}}},
		SetupStep{WaitWindow: &WaitWindow{Match: path.Base(rel), TimeoutMS: 15000}})
}

// homeRel maps an OSWorld VM path in the user's home to one relative to
// the sandbox home ("" for the home itself); false for any other path or
// one that climbs out.
func homeRel(p string) (string, bool) {
	var rest string
	switch {
	case p == OSWorldHome || p == "~":
		return "", true
	case strings.HasPrefix(p, OSWorldHome+"/"):
		rest = p[len(OSWorldHome)+1:]
	case strings.HasPrefix(p, "~/"):
		rest = p[2:]
	default:
		return "", false
	}
	if strings.ContainsAny(rest, "\x00\n") {
		return "", false
	}
	for _, part := range strings.Split(rest, "/") {
		if part == ".." {
			return "", false
		}
	}
	rest = path.Clean(rest)
	if rest == "." {
		return "", true
	}
	return rest, true
}

// download puts each file from the cache at its path, and checks its
// sha256 in the sandbox.
func (c *conv) download(p map[string]json.RawMessage) {
	var files []struct {
		URL  string `json:"url"`
		Path string `json:"path"`
	}
	if v, ok := p["files"]; !ok || json.Unmarshal(v, &files) != nil {
		c.e.refuse(RefuseConfig, "download without files")
		return
	}
	for _, f := range files {
		rel, ok := homeRel(f.Path)
		if !ok || rel == "" {
			c.e.refuse(RefusePath, f.Path)
			continue
		}
		b, ok := c.cacheFile(f.URL, path.Base(rel))
		if !ok {
			continue
		}
		sum := sha256.Sum256(b)
		c.instance = append(c.instance,
			SetupStep{PutFile: &PutFile{Path: "~/" + rel, Text: base64.StdEncoding.EncodeToString(b), Base64: true}},
			SetupStep{Exec: &Exec{Shell: "printf '%s  %s\\n' " + hex.EncodeToString(sum[:]) + " " + ShellQuote(rel) + " | sha256sum -c --quiet", TimeoutMS: 10000}})
	}
}

// cacheFile finds a file OSWorld would download from rawURL and name
// name (docs/osworld.md, "The cache"): <cache>/<task id>/<name>, OSWorld's
// own cache name <cache>/<task id>/<uuid5(url)>_<name>, then
// <cache>/<name> and <cache>/<basename of the URL's path>.
func (c *conv) cacheFile(rawURL, name string) ([]byte, bool) {
	if c.opt.Cache != "" && c.t.ID == filepath.Base(c.t.ID) && !strings.HasPrefix(c.t.ID, ".") {
		cands := []string{
			filepath.Join(c.opt.Cache, c.t.ID, name),
			filepath.Join(c.opt.Cache, c.t.ID, uuid5URL(rawURL)+"_"+name),
			filepath.Join(c.opt.Cache, name),
		}
		if u, err := url.Parse(rawURL); err == nil {
			if b := path.Base(u.Path); b != "." && b != "/" && b != "download" && b != "uc" {
				cands = append(cands, filepath.Join(c.opt.Cache, b))
			}
		}
		for _, f := range cands {
			if filepath.Base(f) == "." || strings.Contains(filepath.Base(f), "..") {
				continue
			}
			st, err := os.Lstat(f)
			if err != nil || !st.Mode().IsRegular() {
				continue
			}
			if st.Size() > OSWorldMaxFile {
				c.e.refuse(RefuseCacheTooBig, name)
				return nil, false
			}
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			return b, true
		}
	}
	c.e.refuse(RefuseCacheFile, name)
	return nil, false
}

// uuid5URL is uuid.uuid5(uuid.NAMESPACE_URL, u), the name OSWorld's
// downloader gives a cached file.
func uuid5URL(u string) string {
	ns := []byte{0x6b, 0xa7, 0xb8, 0x11, 0x9d, 0xad, 0x11, 0xd1, 0x80, 0xb4, 0x00, 0xc0, 0x4f, 0xd4, 0x30, 0xc8}
	h := sha1.Sum(append(ns, u...))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	x := hex.EncodeToString(h[:16])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
