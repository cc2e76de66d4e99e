package rollout

import (
	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
)

// pixelDialects read coordinates as pixels of the image the model saw.
var pixelDialects = map[string]bool{"pyautogui": true, "xml": true, "json": true}

// stepCoords is the coordinate space a step declares: when the observation
// is downscaled or cropped, the policy saw the frame, not the screen, so
// typed actions and pixel-dialect text are read in frame pixels ("frame"),
// which the server maps back through the frame's display descriptor. Other
// dialects keep their family's default (nil).
func stepCoords(o *api.Observe, dec Decision) any {
	if o == nil || (o.MaxLongEdge <= 0 && (o.Scope == "" || o.Scope == aci.ScopeScreen)) {
		return nil
	}
	if dec.Actions != nil || pixelDialects[dec.Dialect] {
		return aci.CoordsFrame
	}
	return nil
}
