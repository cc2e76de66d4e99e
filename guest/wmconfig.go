package guest

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// The window manager runs as an identity of its own, neither the agent's
// nor guestd's (docs/architecture.md, "Reward integrity"): the agent can
// neither signal nor trace it, so it lives through a reset in place
// instead of starting afresh (most of a reset's cost). What it starts would
// run as that identity, outside everything that confines and ends the
// agent's processes, so it must start nothing: its configuration is the
// system's own less every binding whose actions start a program, show the
// root menu (whose entries do), or end or replace the window manager.

// openboxRC is where Debian's openbox keeps its default configuration.
var openboxRC = []string{"/etc/xdg/openbox/rc.xml"}

// wmDenied are the openbox actions a binding may not hold.
var wmDenied = map[string]bool{"execute": true, "exit": true, "restart": true, "sessionlogout": true}

// writeWMConfig writes, to dir/rc.xml, the system's openbox configuration
// with every key and mouse binding that could start a program or end the
// window manager removed, and returns its path.
func writeWMConfig(dir string) (string, error) {
	var src []byte
	for _, p := range openboxRC {
		if b, err := os.ReadFile(p); err == nil {
			src = b
			break
		}
	}
	if src == nil {
		return "", errors.New("guest: window manager: no openbox rc.xml to start from")
	}
	out, err := sanitizeOpenbox(src)
	if err != nil {
		return "", fmt.Errorf("guest: window manager: %w", err)
	}
	path := filepath.Join(dir, "rc.xml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// sanitizeOpenbox copies an openbox rc.xml byte for byte, leaving out each
// <keybind> and <mousebind> that holds a denied action or shows the root
// menu.
func sanitizeOpenbox(src []byte) ([]byte, error) {
	dec := xml.NewDecoder(bytes.NewReader(src))
	var out bytes.Buffer
	last := int64(0) // src up to here is decided
	for {
		start := dec.InputOffset()
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		se, ok := tok.(xml.StartElement)
		if !ok || (se.Name.Local != "keybind" && se.Name.Local != "mousebind") {
			continue
		}
		body, err := subtree(dec, se)
		if err != nil {
			return nil, err
		}
		if !bindingAllowed(body) {
			out.Write(src[last:start])
			last = dec.InputOffset()
		}
	}
	out.Write(src[last:])
	return out.Bytes(), nil
}

// subtree reads the element se opens, to its end, as tokens (se included).
func subtree(dec *xml.Decoder, se xml.StartElement) ([]xml.Token, error) {
	toks := []xml.Token{se.Copy()}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		}
		toks = append(toks, xml.CopyToken(tok))
	}
	return toks, nil
}

// bindingAllowed reports whether a binding's tokens hold no denied action
// and no ShowMenu of the root menu.
func bindingAllowed(toks []xml.Token) bool {
	inMenu := false
	for _, t := range toks {
		switch t := t.(type) {
		case xml.StartElement:
			if t.Name.Local == "action" {
				for _, a := range t.Attr {
					if a.Name.Local == "name" && wmDenied[strings.ToLower(a.Value)] {
						return false
					}
				}
			}
			inMenu = t.Name.Local == "menu"
		case xml.CharData:
			if inMenu && strings.ToLower(string(bytes.TrimSpace(t))) == "root-menu" {
				return false
			}
		case xml.EndElement:
			inMenu = false
		}
	}
	return true
}
