// Package hostdeps says which of the programs a sandbox's desktop runs are
// installed on this host. Providers whose sandboxes run the host's binaries
// ask it what to claim (pool.Capabilities) without linking guestd's runtime.
package hostdeps

import (
	"os"
	"os/exec"
)

// BusDaemon is the D-Bus daemon binary; Registryd the places the AT-SPI
// registry is installed.
var (
	BusDaemon = "dbus-daemon"
	Registryd = []string{"/usr/libexec/at-spi2-registryd", "/usr/lib/at-spi2-core/at-spi2-registryd", "/usr/lib/at-spi2/at-spi2-registryd"}
)

// HasA11y reports whether this system has what an accessibility bus needs.
func HasA11y() bool {
	if _, err := exec.LookPath(BusDaemon); err != nil {
		return false
	}
	return FindRegistryd() != ""
}

// FindRegistryd is the AT-SPI registry's path, "" where none is installed.
func FindRegistryd() string {
	for _, p := range Registryd {
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}
