package api

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLeaf: the wire package imports the standard library, aci and its
// msgpack codec only, so a client of the API links nothing of the server,
// the pool or the guest.
var leafImports = map[string]bool{"github.com/shinken-rl/shinken/aci": true, "github.com/vmihailenco/msgpack/v5": true}

func TestLeaf(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if strings.Contains(strings.SplitN(p, "/", 2)[0], ".") && !leafImports[p] {
				t.Errorf("%s imports %s: the API package may import aci, msgpack and the standard library only", f, p)
			}
		}
	}
}
