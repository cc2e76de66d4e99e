package guest

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// LibreOffice's user profile for the agent: Calc and Writer start straight
// on the document, with nothing between the agent and it, and leave
// nothing behind that would put something there on the next start.
//
// LibreOffice keeps the user's settings in
// $HOME/.config/libreoffice/4/user/registrymodifications.xcu (with
// $XDG_CONFIG_HOME unset or $HOME/.config; -env:UserInstallation moves it),
// a list of values that override the installation's defaults. It creates
// the rest of the profile on first start. Each setting, and why
// (measured with LibreOffice 7.4 under Xvfb and openbox):
//
//   - Setup/Office/ooSetupInstCompleted: the first start is done.
//     LibreOffice on Linux shows no first-start wizard any more; this
//     keeps it that way.
//   - Setup/Product/ooSetupLastVersion = 99.0: the "What's New" infobar
//     (and its release-notes button) shows when the version that last ran
//     is older than this one; no version to come is newer than 99.0.
//   - Setup/Product/LastTimeGetInvolvedShown and LastTimeDonateShown in
//     2100: the "Get Involved" and "Donate" infobars show every 90 days
//     after the last showing, never before one in the future.
//   - Office.Common/Misc/ShowTipOfTheDay = false: the Tip of the Day
//     dialog, which every start shows over the document otherwise (the
//     only dialog a fresh profile shows).
//   - Office.Common/Misc/FirstRun = false: what a first run shows beyond
//     the tip (nothing in 7.4; newer versions' welcome dialog).
//   - Office.Recovery/RecoveryInfo/Enabled = false, AutoSave/Enabled =
//     false: no recovery data, so a LibreOffice killed by a reset or a
//     step limit leaves no "Document Recovery" dialog for the next start,
//     and no timed autosave writes behind the agent's back.
//   - Office.Common/Save/Document/CreateBackup = false, AutoSave = false:
//     no backup copies, no autosave prompt (both the defaults, pinned).
//   - Office.Common/Misc/UseLocking, UseDocumentOOoLockFile,
//     UseDocumentSystemFileLocking = false: no ".~lock.NAME#" file beside
//     the document (it would show in the agent's home and, left by a
//     killed LibreOffice, make the next open ask "Document in Use").
//   - Office.Common/Save/Document/WarnAlienFormat = false: no "Keep
//     current format" dialog on saving to a format not ODF (CSV, XLSX).
//     The flat formats (.fods, .fodt) are ODF and never ask; this covers
//     a task that saves as CSV.
//
// Measured (TestOfficeProfileLibreOffice; a 2-core machine, 1280x800
// Xvfb): from exec to the document's window, 2.4 s for Calc the very first
// time (nothing in the page cache), 0.8 to 1.4 s on a fresh profile after,
// 0.25 to 0.45 s on a profile LibreOffice has filled in; no other window
// shows, ctrl+s saves a .fods or .fodt in place, still flat, in 0.1 to 0.25
// s. Without this profile the same start shows "Tip of the Day" over the
// document and leaves .~lock.book.fods# in the home, and a LibreOffice
// killed after an edit comes back with "Document Recovery".
//
// Left at the defaults: macro security (Office.Common/Security/Scripting:
// MacroSecurityLevel 2, high: only signed macros from trusted sources
// run), formula recalculation on load, AutoInput (Calc completes a text
// from the column's others) and AutoCorrect (Writer capitalizes a
// sentence's first letter: "new para" typed is saved "New para"; Calc
// left "hello world" as typed): the agent meets LibreOffice as a user
// does, and a verifier of typed text allows for it. There is no update check to
// turn off: Debian's LibreOffice is built without the online update
// (no updchk library, no UpdateCheck job).
const officeProfile = `<?xml version="1.0" encoding="UTF-8"?>
<oor:items xmlns:oor="http://openoffice.org/2001/registry" xmlns:xs="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<item oor:path="/org.openoffice.Setup/Office"><prop oor:name="ooSetupInstCompleted" oor:op="fuse"><value>true</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="ooSetupLastVersion" oor:op="fuse"><value>99.0</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="LastTimeGetInvolvedShown" oor:op="fuse"><value>4102444800</value></prop></item>
<item oor:path="/org.openoffice.Setup/Product"><prop oor:name="LastTimeDonateShown" oor:op="fuse"><value>4102444800</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="ShowTipOfTheDay" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="FirstRun" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/RecoveryInfo"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Recovery/AutoSave"><prop oor:name="Enabled" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="CreateBackup" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="AutoSave" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Save/Document"><prop oor:name="WarnAlienFormat" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseLocking" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseDocumentOOoLockFile" oor:op="fuse"><value>false</value></prop></item>
<item oor:path="/org.openoffice.Office.Common/Misc"><prop oor:name="UseDocumentSystemFileLocking" oor:op="fuse"><value>false</value></prop></item>
</oor:items>
`

// officeProfileDir is the profile's directory under a home.
var officeProfileDir = []string{".config", "libreoffice", "4", "user"}

// WriteOfficeProfile writes LibreOffice's settings (officeProfile) for the
// user whose home is home, unless the file is already there: the
// directories it creates are uid:gid's, 0700, the file 0600. Below home no
// link is followed (the home is the agent's): a link where a directory or
// the file belongs fails it.
func WriteOfficeProfile(home string, uid, gid int) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("guest: LibreOffice profile: %s: %w", what, err)
	}
	fd, err := unix.Open(home, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(home, err)
	}
	path := home
	for _, name := range officeProfileDir {
		path = filepath.Join(path, name)
		created := true
		if err := unix.Mkdirat(fd, name, 0o700); errors.Is(err, unix.EEXIST) {
			created = false
		} else if err != nil {
			unix.Close(fd)
			return fail(path, err)
		}
		next, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return fail(path, err)
		}
		fd = next
		if created {
			if err := unix.Fchown(fd, uid, gid); err != nil {
				unix.Close(fd)
				return fail(path, err)
			}
			if err := unix.Fchmod(fd, 0o700); err != nil {
				unix.Close(fd)
				return fail(path, err)
			}
		}
	}
	defer unix.Close(fd)
	path = filepath.Join(path, "registrymodifications.xcu")
	f, err := unix.Openat(fd, "registrymodifications.xcu", unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		var st unix.Stat_t
		if err := unix.Fstatat(fd, "registrymodifications.xcu", &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return fail(path, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return fail(path, fmt.Errorf("a %s, not a regular file", kindOf(st.Mode)))
		}
		return nil
	}
	if err != nil {
		return fail(path, err)
	}
	defer unix.Close(f)
	if err := unix.Fchown(f, uid, gid); err != nil {
		return fail(path, err)
	}
	if err := unix.Fchmod(f, 0o600); err != nil {
		return fail(path, err)
	}
	for b := []byte(officeProfile); len(b) > 0; {
		n, err := unix.Write(f, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fail(path, err)
		}
		b = b[n:]
	}
	return nil
}

// officeNames are the app names that start LibreOffice.
var officeNames = map[string]bool{"libreoffice": true, "soffice": true, "localc": true, "lowriter": true, "loimpress": true}

// isOffice reports whether app starts LibreOffice.
func isOffice(app string) bool { return officeNames[filepath.Base(app)] }
