package configs

import (
	"path"
	"regexp"
	"strings"
)

// Commands: OSWorld's commands become one sh command each, with the VM
// home's paths mapped and the programs and Python modules they need
// checked against what the sandbox has.

// shellCommand is an OSWorld command (argv, or a shell string) as one
// command for sh, with the VM home's paths mapped to $homeVar; it refuses
// the programs the sandbox lacks. OSWorld runs "python"; Debian's is
// python3.
func (c *conv) shellCommand(argv []string, sh, homeVar string) (string, bool) {
	if argv != nil {
		if argv[0] == "python" {
			argv = append([]string{"python3"}, argv[1:]...)
		}
		if !c.programsOK([]string{path.Base(argv[0])}) {
			return "", false
		}
		if argv[0] == "python3" && len(argv) >= 3 && argv[1] == "-c" && !c.modulesOK(argv[2]) {
			return "", false
		}
		q := make([]string, len(argv))
		for i, a := range argv {
			if rel, ok := homeRel(a); ok && (a == OSWorldHome || strings.HasPrefix(a, OSWorldHome+"/")) {
				q[i] = `"$` + homeVar + `"`
				if rel != "" {
					q[i] += ShellQuote("/" + rel)
				}
			} else {
				q[i] = ShellQuote(a)
			}
		}
		return strings.Join(q, " "), true
	}
	progs, ok := shellPrograms(sh)
	if !ok {
		c.e.refuse(RefuseConfig, "a shell command the importer cannot read")
		return "", false
	}
	if !c.programsOK(progs) {
		return "", false
	}
	return mapHomeInShell(sh, homeVar), true
}

func (c *conv) programsOK(progs []string) bool {
	ok := true
	for _, p := range progs {
		if !sandboxPrograms[p] {
			c.e.refuse(RefuseProgram, p)
			ok = false
		}
	}
	return ok
}

var pyImport = regexp.MustCompile(`(?:^|[;\n]\s*)(?:import\s+([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)|from\s+([A-Za-z_][\w.]*)\s+import)`)

// modulesOK refuses a python3 -c program that imports a module Debian's
// python3 in the image lacks.
func (c *conv) modulesOK(code string) bool {
	ok := true
	for _, m := range pyImport.FindAllStringSubmatch(code, -1) {
		names := m[2]
		if m[1] != "" {
			names = m[1]
		}
		for _, n := range strings.Split(names, ",") {
			n = strings.TrimSpace(n)
			if i := strings.IndexByte(n, '.'); i >= 0 {
				n = n[:i]
			}
			if n != "" && !pythonStdlib[n] {
				c.e.refuse(RefusePythonModule, n)
				ok = false
			}
		}
	}
	return ok
}

var pythonStdlib = map[string]bool{
	"os": true, "sys": true, "time": true, "json": true, "re": true, "subprocess": true, "shutil": true,
	"pathlib": true, "glob": true, "csv": true, "datetime": true, "math": true, "random": true,
	"hashlib": true, "base64": true, "io": true, "tempfile": true, "string": true, "collections": true,
}

// sandboxPrograms are the commands a sandbox's sh can run: its builtins,
// and the programs of Debian's essential set and the image
// (images/packages.txt) that OSWorld's commands use.
var sandboxPrograms = map[string]bool{}

func init() {
	for _, p := range strings.Fields(`: . [ cd echo printf test true false exit export read set unset eval exec
		shift return local pwd command type wait kill trap umask
		cat ls mkdir rmdir rm cp mv touch chmod ln head tail wc sort uniq cut tr tee date sleep
		basename dirname find grep egrep fgrep sed awk mawk xargs stat du df env readlink realpath seq expr id
		whoami diff cmp gzip gunzip tar md5sum sha256sum mktemp nl fold paste join comm split od base64 yes
		timeout nproc uname hostname which sh bash dash python3 pgrep pkill ps
		xterm mousepad pcmanfm galculator mupdf feh chromium libreoffice soffice pdftotext`) {
		sandboxPrograms[p] = true
	}
}

var shellName = regexp.MustCompile(`^[A-Za-z_]\w*$`)

var shellKeywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "fi": true, "do": true,
	"done": true, "while": true, "until": true, "!": true, "{": true, "}": true, "time": true}

// shellPrograms lists the programs a shell command runs: the first word of
// each simple command (after assignments and keywords). It is a reader
// for OSWorld's short commands, not a shell parser: a for or case loop,
// a function definition, a here-document or an unbalanced quote is
// reported as not readable.
func shellPrograms(sh string) ([]string, bool) {
	var progs []string
	word := strings.Builder{}
	var words []string
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, word.String())
			word.Reset()
			inWord = false
		}
	}
	cmdEnd := func() bool {
		flush()
		for len(words) > 0 {
			w := words[0]
			if shellKeywords[w] {
				words = words[1:]
				continue
			}
			if i := strings.IndexByte(w, '='); i > 0 && shellName.MatchString(w[:i]) {
				words = words[1:]
				continue
			}
			break
		}
		if len(words) > 0 {
			w := words[0]
			if w == "for" || w == "case" || w == "function" || strings.HasSuffix(w, "()") || strings.ContainsAny(w, "$`*?") {
				return false
			}
			progs = append(progs, path.Base(w))
		}
		words = nil
		return true
	}
	for i := 0; i < len(sh); i++ {
		ch := sh[i]
		switch {
		case ch == '\\' && i+1 < len(sh):
			word.WriteByte(sh[i+1])
			inWord = true
			i++
		case ch == '\'':
			j := strings.IndexByte(sh[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			word.WriteString(sh[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			j := i + 1
			for ; j < len(sh) && sh[j] != '"'; j++ {
				if sh[j] == '\\' {
					j++
				} else if sh[j] == '`' || (sh[j] == '$' && j+1 < len(sh) && sh[j+1] == '(') {
					return nil, false // a command inside double quotes
				}
			}
			if j >= len(sh) {
				return nil, false
			}
			word.WriteString(sh[i+1 : j])
			inWord = true
			i = j
		case ch == '<' && i+1 < len(sh) && sh[i+1] == '<':
			return nil, false
		case ch == '$' && i+1 < len(sh) && sh[i+1] == '(':
			if i+2 < len(sh) && sh[i+2] == '(' {
				return nil, false
			}
			word.WriteString("$")
			inWord = true
			if !cmdEnd() {
				return nil, false
			}
			i++
		case ch == '`':
			return nil, false
		case ch == ';' || ch == '&' || ch == '|' || ch == '\n' || ch == '(' || ch == ')':
			if !cmdEnd() {
				return nil, false
			}
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '#' && !inWord:
			j := strings.IndexByte(sh[i:], '\n')
			if j < 0 {
				i = len(sh)
			} else {
				i += j - 1
			}
		default:
			word.WriteByte(ch)
			inWord = true
		}
	}
	if !cmdEnd() {
		return nil, false
	}
	return progs, true
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// mapHomeInShell rewrites the VM home in a shell command to $homeVar,
// quoted for where it stands: outside quotes "$V", inside double quotes
// ${V}, inside single quotes '"$V"' (the quote closed and reopened). With
// homeVar AGENT_HOME (a verifier's command) a leading ~ and $HOME are
// mapped too, as the verifier's own home is not the agent's.
func mapHomeInShell(sh, homeVar string) string {
	var b strings.Builder
	const (
		none = iota
		single
		double
	)
	state := none
	atHome := func(i int) bool {
		if !strings.HasPrefix(sh[i:], OSWorldHome) {
			return false
		}
		j := i + len(OSWorldHome)
		return j == len(sh) || !(isWordByte(sh[j]) || sh[j] == '-' || sh[j] == '.')
	}
	for i := 0; i < len(sh); i++ {
		ch := sh[i]
		if homeVar == "AGENT_HOME" && state != single {
			// $HOME in a verifier's command is the verifier's own.
			if strings.HasPrefix(sh[i:], "${HOME}") {
				b.WriteString("${AGENT_HOME}")
				i += len("${HOME}") - 1
				continue
			}
			if strings.HasPrefix(sh[i:], "$HOME") && (i+5 == len(sh) || !isWordByte(sh[i+5])) {
				b.WriteString("$AGENT_HOME")
				i += len("$HOME") - 1
				continue
			}
		}
		if atHome(i) {
			switch state {
			case none:
				b.WriteString(`"$` + homeVar + `"`)
			case double:
				b.WriteString("${" + homeVar + "}")
			case single:
				b.WriteString(`'"$` + homeVar + `"'`)
			}
			i += len(OSWorldHome) - 1
			continue
		}
		switch state {
		case none:
			switch ch {
			case '\\':
				b.WriteByte(ch)
				if i+1 < len(sh) {
					i++
					b.WriteByte(sh[i])
				}
				continue
			case '\'':
				state = single
			case '"':
				state = double
			case '~':
				if homeVar == "AGENT_HOME" && (i == 0 || strings.IndexByte(" \t\n;&|(=", sh[i-1]) >= 0) &&
					(i+1 == len(sh) || strings.IndexByte("/ \t\n;&|)", sh[i+1]) >= 0) {
					b.WriteString(`"$AGENT_HOME"`)
					continue
				}
			}
		case single:
			if ch == '\'' {
				state = none
			}
		case double:
			switch ch {
			case '\\':
				b.WriteByte(ch)
				if i+1 < len(sh) {
					i++
					b.WriteByte(sh[i])
				}
				continue
			case '"':
				state = none
			}
		}
		b.WriteByte(ch)
	}
	return b.String()
}
