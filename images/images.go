// Package images names the sandbox image that images/build.sh builds. The
// image's tag is a hash of the recipe's inputs, so Go code and the build script
// agree on which image is current without a registry or a manifest file.
package images

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"strings"
)

//go:embed build.sh
var buildScript []byte

//go:embed packages.txt
var packages []byte

// Repository is the local image repository the build script tags into.
const Repository = "shinken-sandbox"

// Tag returns the content tag: the first 12 hex digits of the SHA-256 of
// build.sh followed by packages.txt, as build.sh computes it.
func Tag() string {
	h := sha256.New()
	h.Write(buildScript)
	h.Write(packages)
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Ref returns the image reference of the current recipe, "shinken-sandbox:<tag>".
func Ref() string { return Repository + ":" + Tag() }

// HasPackage reports whether the recipe installs the Debian package name.
func HasPackage(name string) bool {
	for _, l := range strings.Split(string(packages), "\n") {
		if strings.TrimSpace(l) == name {
			return true
		}
	}
	return false
}
