package webapp

import "embed"

// mailFS holds the mail app's page templates.
//
//go:embed pages/mail/*.html
var mailFS embed.FS
