package guest

import (
	"bytes"
	"path/filepath"
)

// appExports are app config files that their app keeps private to the
// agent's user, which a verifier reads: VLC writes vlcrc 0600 (a
// temporary file renamed over it), so the verifier's uid could not read
// it itself. Each is handed over under its base name.
var appExports = []string{".config/vlc/vlcrc"}

// exportApps copies the app exports found under agentHome into dir, the
// verifier's, owned by id, and returns how many it copied. Each is read
// as the check mode reads an agent's file (verifylib.go: a regular file,
// no link followed anywhere below the home, bounded, never blocking),
// with guestd's rights; a file that fails that is left out, so the
// verifier finds it missing.
func exportApps(agentHome, dir string, id *Identity) (int, error) {
	n := 0
	for _, rel := range appExports {
		var out, errb bytes.Buffer
		if Check([]string{"read", filepath.Join(agentHome, rel)}, agentHome, &out, &errb) != CheckOK {
			continue
		}
		if err := handOver(dir, filepath.Base(rel), out.Bytes(), id); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}
