package guest

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// officeOwner is who the profile's files are for in the tests: another uid
// where the test may chown, else the test's own.
func officeOwner() (int, int) {
	if os.Geteuid() == 0 {
		return otherUID, otherUID
	}
	return os.Getuid(), os.Getgid()
}

func TestOfficeProfile(t *testing.T) {
	uid, gid := officeOwner()
	home := t.TempDir()
	if err := WriteOfficeProfile(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	path := home
	for _, d := range officeProfileDir {
		path = filepath.Join(path, d)
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || st.Mode&0o7777 != 0o700 || int(st.Uid) != uid || int(st.Gid) != gid {
			t.Errorf("%s: mode %o owner %d:%d; want a 0700 directory of %d:%d", path, st.Mode, st.Uid, st.Gid, uid, gid)
		}
	}
	file := filepath.Join(path, "registrymodifications.xcu")
	var st unix.Stat_t
	if err := unix.Lstat(file, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != 0o600 || int(st.Uid) != uid || int(st.Gid) != gid {
		t.Errorf("%s: mode %o owner %d:%d; want a 0600 file of %d:%d", file, st.Mode, st.Uid, st.Gid, uid, gid)
	}
	if b, _ := os.ReadFile(file); string(b) != officeProfile {
		t.Errorf("profile:\n%s", b)
	}
	// A profile already there is the user's: kept as it is.
	if err := os.WriteFile(file, []byte("<mine/>"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteOfficeProfile(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "<mine/>" {
		t.Errorf("an existing profile was rewritten: %q", b)
	}
	// Links below the home are never followed.
	elsewhere := t.TempDir()
	for _, c := range []struct{ link, target string }{
		{".config", elsewhere},
		{".config/libreoffice/4/user/registrymodifications.xcu", filepath.Join(elsewhere, "x")},
	} {
		h := t.TempDir()
		l := filepath.Join(h, c.link)
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(c.target, l); err != nil {
			t.Fatal(err)
		}
		if err := WriteOfficeProfile(h, uid, gid); err == nil {
			t.Errorf("a link at %s: no error", c.link)
		}
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("wrote through a link: %v", ents)
	}
}

// TestOfficeProfileSchema: every setting names a property LibreOffice's
// schema has (a misspelt one is silently ignored), where LibreOffice is
// installed.
func TestOfficeProfileSchema(t *testing.T) {
	schemas, _ := filepath.Glob("/usr/lib/libreoffice/share/registry/*.xcd")
	if len(schemas) == 0 {
		t.Skip("needs LibreOffice's registry (/usr/lib/libreoffice/share/registry)")
	}
	known := map[string]bool{}
	for _, s := range schemas {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		schemaProps(t, b, known)
	}
	d := xml.NewDecoder(strings.NewReader(officeProfile))
	n := 0
	var path string
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("profile: %v", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "item":
			path = xmlAttr(se, "path")
		case "prop":
			n++
			if p := path + "/" + xmlAttr(se, "name"); !known[p] {
				t.Errorf("%s: no such property in LibreOffice's schema", p)
			}
		}
	}
	if n != strings.Count(officeProfile, "<prop ") {
		t.Errorf("read %d settings", n)
	}
}

func xmlAttr(se xml.StartElement, local string) string {
	for _, a := range se.Attr {
		if a.Name.Local == local {
			return a.Value
		}
	}
	return ""
}

// schemaProps adds the properties of an .xcd's component schemas to known,
// as /package.Component/group/.../prop.
func schemaProps(t *testing.T, b []byte, known map[string]bool) {
	d := xml.NewDecoder(bytes.NewReader(b))
	var stack []string
	inTemplates := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			name := xmlAttr(e, "name")
			switch e.Name.Local {
			case "component-schema":
				name = "/" + xmlAttr(e, "package") + "." + name
			case "templates":
				inTemplates++
			case "prop":
				if len(stack) > 0 && inTemplates == 0 {
					known[strings.Join(stack[1:], "")+"/"+name] = true
				}
			}
			if e.Name.Local == "component-schema" || e.Name.Local == "group" || e.Name.Local == "set" {
				stack = append(stack, "/"+strings.TrimPrefix(name, "/"))
			} else {
				stack = append(stack, "")
			}
		case xml.EndElement:
			if e.Name.Local == "templates" {
				inTemplates--
			}
			stack = stack[:len(stack)-1]
		}
	}
}

// TestOfficeProfileLibreOffice starts Calc and Writer under a throwaway
// Xvfb and openbox with the profile, as another uid, and checks that the
// document's window is the only one (no tip, wizard or recovery dialog),
// that a typed edit saved with ctrl+s lands in the file, still flat ODF,
// with no dialog and no lock file, and that a LibreOffice killed with an
// unsaved edit leaves no recovery dialog for the next start. It logs the
// start times.
func TestOfficeProfileLibreOffice(t *testing.T) {
	for _, prog := range []string{"soffice", "Xvfb", "openbox", "xdotool"} {
		if _, err := exec.LookPath(prog); err != nil || testing.Short() {
			t.Skipf("needs %s (and not -short)", prog)
		}
	}
	uid, gid := officeOwner()
	// A directory every uid may traverse (t.TempDir's parent is 0700).
	root, err := os.MkdirTemp("", "office-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(root, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	if err := WriteOfficeProfile(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	book, notes := filepath.Join(home, "book.fods"), filepath.Join(home, "notes.fodt")
	writeFile(t, book, []byte(flatODF("spreadsheet", odsStyles, odsAuto, odsBody)), 0o644)
	writeFile(t, notes, []byte(flatODF("text", odtStyles, odtAuto, odtBody)), 0o644)
	for _, f := range []string{book, notes} {
		if err := os.Chown(f, uid, gid); err != nil {
			t.Fatal(err)
		}
	}

	// Each process in a group of its own, killed whole at the end.
	var groups []int
	t.Cleanup(func() {
		for i := len(groups) - 1; i >= 0; i-- {
			unix.Kill(-groups[i], unix.SIGKILL)
		}
	})
	start := func(cmd *exec.Cmd, asUser bool) {
		t.Helper()
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if asUser && os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		groups = append(groups, cmd.Process.Pid)
		go cmd.Wait()
	}
	// Xvfb picks a free display and writes its number to fd 3.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	xvfb := exec.Command("Xvfb", "-displayfd", "3", "-screen", "0", "1280x800x24", "-nolisten", "tcp")
	xvfb.ExtraFiles = []*os.File{w}
	start(xvfb, false)
	w.Close()
	line, err := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if err != nil {
		t.Fatalf("Xvfb: %v", err)
	}
	display := ":" + strings.TrimSpace(line)
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "DISPLAY=" + display, "LANG=C.UTF-8"}
	wm := exec.Command("openbox")
	wm.Env = env
	start(wm, true)

	xdo := func(args ...string) string {
		cmd := exec.Command("xdotool", args...)
		cmd.Env = env
		out, _ := cmd.Output()
		return strings.TrimSpace(string(out))
	}
	// visible are the names of the mapped windows.
	visible := func() []string {
		var names []string
		for _, id := range strings.Fields(xdo("search", "--onlyvisible", "--name", ".")) {
			if n := xdo("getwindowname", id); n != "" {
				names = append(names, n)
			}
		}
		return names
	}
	waitFor := func(what string, limit time.Duration, ok func() bool) time.Duration {
		t.Helper()
		t0 := time.Now()
		for !ok() {
			if time.Since(t0) > limit {
				t.Fatalf("no %s after %v; windows %q", what, limit, visible())
			}
			time.Sleep(50 * time.Millisecond)
		}
		return time.Since(t0)
	}
	// onlyWindow checks, after the time a dialog takes to follow the
	// document, that the document's window is the only one shown.
	onlyWindow := func(title string) string {
		t.Helper()
		time.Sleep(3 * time.Second)
		id := ""
		for _, n := range visible() {
			if n != title {
				t.Errorf("a window %q besides %q", n, title)
			}
		}
		if id = xdo("search", "--onlyvisible", "--name", "^"+title+"$"); id == "" {
			t.Fatalf("no window %q", title)
		}
		return strings.Fields(id)[0]
	}
	soffice := func(app, doc string) *exec.Cmd {
		cmd := exec.Command("soffice", app, doc)
		cmd.Env, cmd.Dir = env, home
		start(cmd, true)
		return cmd
	}
	modified := func(path string) func() bool {
		var st0 unix.Stat_t
		unix.Stat(path, &st0)
		return func() bool {
			var st unix.Stat_t
			return unix.Stat(path, &st) == nil && st.Mtim != st0.Mtim
		}
	}
	lockFree := func() {
		t.Helper()
		ents, _ := os.ReadDir(home)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".~lock") {
				t.Errorf("a lock file %s in the home", e.Name())
			}
		}
	}

	// Calc, the first start on this profile.
	calc := soffice("--calc", book)
	took := waitFor("Calc window", 60*time.Second, func() bool { return xdo("search", "--onlyvisible", "--name", "^book.fods - LibreOffice Calc$") != "" })
	t.Logf("Calc on a fresh profile: the document's window after %v", took)
	win := onlyWindow("book.fods - LibreOffice Calc")
	lockFree()
	xdo("windowactivate", "--sync", win)
	xdo("key", "ctrl+Home")
	xdo("type", "--delay", "40", "hello world")
	xdo("key", "Return")
	saved := modified(book)
	xdo("key", "ctrl+s")
	took = waitFor("save", 20*time.Second, saved)
	t.Logf("Calc saved after %v", took)
	onlyWindow("book.fods - LibreOffice Calc")
	out, errs, st := runCheck(t, "", "cells", book)
	if st != CheckOK || !strings.HasPrefix(out, "Sales\tA1\thello world\t\tstring\tbold\n") {
		t.Errorf("cells of the saved book: status %d (%s)\n%.300s", st, errs, out)
	}
	if b, _ := os.ReadFile(book); !bytes.HasPrefix(b, []byte("<?xml")) || !bytes.Contains(b[:min(len(b), 2000)], []byte("<office:document ")) {
		t.Errorf("the saved book is not flat ODF: %.200q", b)
	}
	// An unsaved edit, then LibreOffice killed as a reset kills it.
	xdo("type", "--delay", "40", "unsaved")
	xdo("key", "Return")
	time.Sleep(500 * time.Millisecond)
	unix.Kill(-calc.Process.Pid, unix.SIGKILL)
	waitFor("Calc gone", 10*time.Second, func() bool { return xdo("search", "--name", "LibreOffice Calc") == "" })

	// Writer, on the profile LibreOffice has now filled in.
	soffice("--writer", notes)
	took = waitFor("Writer window", 60*time.Second, func() bool {
		return xdo("search", "--onlyvisible", "--name", "^notes.fodt - LibreOffice Writer$") != ""
	})
	t.Logf("Writer on a used profile, after a kill: the document's window after %v", took)
	win = onlyWindow("notes.fodt - LibreOffice Writer")
	lockFree()
	xdo("windowactivate", "--sync", win)
	xdo("key", "ctrl+End", "Return")
	xdo("type", "--delay", "40", "New para")
	xdo("key", "shift+Home", "ctrl+b")
	saved = modified(notes)
	xdo("key", "ctrl+s")
	waitFor("save", 20*time.Second, saved)
	onlyWindow("notes.fodt - LibreOffice Writer")
	out, errs, st = runCheck(t, "", "paras", notes)
	if st != CheckOK || !strings.HasSuffix(out, "p\tStandard\tbold\tNew para\n") {
		t.Errorf("paras of the saved notes: status %d (%s)\n%s", st, errs, out)
	}
}
