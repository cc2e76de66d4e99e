package configs

import (
	"embed"
	"encoding/json"
	"path"
	"strings"
)

//go:embed lists/*.txt
var listFS embed.FS

// Lists are the built-in word lists parameters draw from, by name (the file
// name under lists/ without .txt). A list is part of every instance drawn
// from it: editing one changes instances, so a family that uses it bumps
// its version (docs/tasks.md, "Determinism").
var Lists = func() map[string][]string {
	out := map[string][]string{}
	names, _ := listFS.ReadDir("lists")
	for _, n := range names {
		b, err := listFS.ReadFile("lists/" + n.Name())
		if err != nil {
			panic(err) // embedded: cannot fail
		}
		out[strings.TrimSuffix(path.Base(n.Name()), ".txt")] = strings.Fields(string(b))
	}
	return out
}()

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
