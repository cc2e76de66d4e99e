package webapp

import "embed"

// shopFS holds the shop's page templates.
//
//go:embed pages/shop/*.html
var shopFS embed.FS
