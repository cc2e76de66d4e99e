package envserver

import (
	"github.com/shinken-rl/shinken/aci"
)

// a11yVerb reports whether v needs the accessibility tree.
func a11yVerb(v aci.Verb) bool {
	for _, a := range aci.A11yVerbs {
		if v == a {
			return true
		}
	}
	return false
}
