package envserver_test

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/configs"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/envserver/servertest"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestTrainerFiles puts and gets files over real HTTP on a real sandbox,
// with the agent's rights: the bytes and their sha256 round-trip and the
// file is the agent's; a wrong checksum, a relative path and a path the
// agent cannot write are refused; the agent's planted link, FIFO and
// directory neither lead a put or a get elsewhere nor hang them; an
// oversized file is too_large; the trajectory records each transfer by
// hash.
func TestTrainerFiles(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.TrainerExec = true }})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || !sp.Trainer.Files || sp.Trainer.MaxGetBytes != wire.MaxGetFile || sp.Trainer.MaxPutBytes != wire.MaxPutFile {
		t.Fatalf("spec trainer %+v (%v); want files with their limits", sp.Trainer, err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env, epID := r.Results[0].EnvID, r.Results[0].EpisodeID
	defer closeEnvs(s, env)
	put := func(path string, data []byte, sha string, mode uint32) (*api.FileReply, error) {
		var out api.FileReply
		_, _, err := s.Call("/v1/files/put", api.FilePutRequest{EnvID: env, Path: path, Data: data, SHA256: sha, Mode: mode}, &out)
		return &out, err
	}
	get := func(path string) (*api.FileReply, error) {
		var out api.FileReply
		_, _, err := s.Call("/v1/files/get", api.FileGetRequest{EnvID: env, Path: path}, &out)
		return &out, err
	}
	sh := func(cmd string) string {
		t.Helper()
		out, err := execCall(s, api.ExecRequest{EnvID: env, Shell: cmd})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return string(out.Stdout)
	}

	data := []byte("fixture\x00with a NUL and more\n")
	got, err := put("~/in/deep/fixture.bin", data, sum(data), 0o750)
	if err != nil || got.SHA256 != sum(data) || got.Size != len(data) {
		t.Fatalf("put: %+v %v", got, err)
	}
	back, err := get("~/in/deep/fixture.bin")
	if err != nil || !bytes.Equal(back.Data, data) || back.SHA256 != sum(data) || back.Size != len(data) {
		t.Fatalf("get: %+v %v; want the bytes put", back, err)
	}
	if st := sh(`stat -c '%a %u' ~/in/deep/fixture.bin; id -u`); len(strings.Fields(st)) != 3 || strings.Fields(st)[0] != "750" || strings.Fields(st)[1] != strings.Fields(st)[2] {
		t.Errorf("put file's mode and owner %q; want 750 and the agent's", st)
	}

	refused := func(what string, err error, want aci.Code) {
		t.Helper()
		if !codeIs(err, want) {
			t.Errorf("%s: %v; want %s", what, err, want)
		}
	}
	_, err = put("~/x.txt", data, sum([]byte("other")), 0)
	refused("put with a wrong sha256", err, aci.CodeChecksumMismatch)
	_, err = put("x.txt", data, sum(data), 0)
	refused("put to a relative path", err, aci.CodeBadRequest)
	_, err = put("/usr/bin/planted", data, sum(data), 0)
	refused("put where the agent cannot write", err, aci.CodeBadRequest)
	_, err = put("~/x.txt", data, sum(data), 0o4755)
	refused("put with a setuid mode", err, aci.CodeBadRequest)
	_, err = get("~/nothing-here")
	refused("get of a missing file", err, aci.CodeNotFound)
	_, err = get("~/in")
	refused("get of a directory", err, aci.CodeBadRequest)

	// The agent's plants: a link to a file it may read, a FIFO nobody
	// writes, a file over the bound.
	sh(`echo secret > ~/target; ln -s ~/target ~/link; mkfifo ~/fifo; head -c 2000000 /dev/zero > ~/big`)
	_, err = get("~/link")
	refused("get through a link", err, aci.CodeBadRequest)
	t0 := time.Now()
	_, err = get("~/fifo")
	refused("get of a FIFO", err, aci.CodeBadRequest)
	_, err = put("~/fifo", data, sum(data), 0)
	refused("put onto a FIFO", err, aci.CodeBadRequest)
	if d := time.Since(t0); d > 20*time.Second {
		t.Errorf("FIFO get and put took %v; want an answer at once", d)
	}
	_, err = put("~/link", data, sum(data), 0)
	refused("put through a link", err, aci.CodeBadRequest)
	if got := sh("cat ~/target"); got != "secret\n" {
		t.Errorf("the link's target holds %q after a put through the link; want it untouched", got)
	}
	_, err = get("~/big")
	refused("get of a 2 MB file", err, aci.CodeTooLarge)

	var tr trajectory.Trajectory
	if err := msgpackGet(t, s, "/v1/episodes/"+epID, &tr); err != nil {
		t.Fatal(err)
	}
	var puts, gets int
	for _, ev := range tr.Events {
		switch {
		case ev.Kind == trajectory.EventPutFile && ev.Error == "" && ev.SHA256 == sum(data) && ev.Path == "~/in/deep/fixture.bin":
			puts++
		case ev.Kind == trajectory.EventGetFile && ev.Error == "" && ev.SHA256 == sum(data):
			gets++
		}
	}
	if puts != 1 || gets != 1 || len(tr.Steps) != 0 {
		t.Errorf("trajectory: %d puts, %d gets recorded by hash, %d steps; want 1, 1, 0", puts, gets, len(tr.Steps))
	}
	step(t, s, api.StepRequest{Steps: []api.StepEnv{{EnvID: env, Action: &aci.Action{Verb: aci.Done}}}})
	_, err = get("~/in/deep/fixture.bin")
	refused("get after the episode ended", err, aci.CodeEpisodeOver)
}

// TestTrainerDirsAndChunks moves a directory in and out as a tar and a file
// larger than one request in chunks, over real HTTP on a real sandbox,
// with the agent's rights: the tree round-trips (links as links, a FIFO
// left out and named); an archive with a link, a device, a name that
// climbs out or too many entries is refused before anything is written;
// a link the agent planted inside the target directory leads nowhere; a
// directory bomb (too many entries, too deep) is too_large, at once;
// chunks go in order, each checked.
func TestTrainerDirsAndChunks(t *testing.T) {
	s := servertest.Start(t, servertest.Options{Pool: 1, Edit: func(c *configs.Server) { c.TrainerExec = true }})
	var sp api.Spec
	if err := msgpackGet(t, s, "/v1/spec", &sp); err != nil || sp.Trainer.MaxTreeEntries != wire.MaxTreeEntries {
		t.Fatalf("spec trainer %+v (%v); want max_tree_entries", sp.Trainer, err)
	}
	r := reset(t, s, api.ResetRequest{Envs: []api.ResetEnv{{Task: "xterm-hello-file"}}})
	env := r.Results[0].EnvID
	defer closeEnvs(s, env)
	put := func(req api.FilePutRequest) (*api.FileReply, error) {
		var out api.FileReply
		req.EnvID = env
		if req.SHA256 == "" {
			req.SHA256 = sum(req.Data)
		}
		_, _, err := s.Call("/v1/files/put", req, &out)
		return &out, err
	}
	get := func(req api.FileGetRequest) (*api.FileReply, error) {
		var out api.FileReply
		req.EnvID = env
		_, _, err := s.Call("/v1/files/get", req, &out)
		return &out, err
	}
	sh := func(cmd string) string {
		t.Helper()
		out, err := execCall(s, api.ExecRequest{EnvID: env, Shell: cmd, TimeoutMS: 30000})
		if err != nil {
			t.Fatalf("exec %q: %v", cmd, err)
		}
		return string(out.Stdout)
	}
	refused := func(what string, err error, want aci.Code) {
		t.Helper()
		if !codeIs(err, want) {
			t.Errorf("%s: %v; want %s", what, err, want)
		}
	}
	archive := func(hs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hs {
			if h.Typeflag == tar.TypeReg {
				h.Size = int64(len(h.Name))
			}
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				tw.Write([]byte(h.Name))
			}
		}
		tw.Close()
		return b.Bytes()
	}

	// A tree in: its files hold their own names.
	tree := archive(&tar.Header{Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o750},
		&tar.Header{Name: "sub/a.txt", Typeflag: tar.TypeReg, Mode: 0o640},
		&tar.Header{Name: "top.txt", Typeflag: tar.TypeReg, Mode: 0o644})
	if _, err := put(api.FilePutRequest{Path: "~/proj", Data: tree, Kind: "tar"}); err != nil {
		t.Fatalf("put tar: %v", err)
	}
	if got := sh(`cd ~/proj && cat sub/a.txt top.txt && stat -c %a sub sub/a.txt`); got != "sub/a.txttop.txt750\n640\n" {
		t.Errorf("unpacked tree: %q", got)
	}
	// The agent adds a link and a FIFO; the tree comes out with the link
	// as a link and the FIFO named, not opened.
	sh(`ln -s /etc/hostname ~/proj/link; mkfifo ~/proj/fifo`)
	t0 := time.Now()
	out, err := get(api.FileGetRequest{Path: "~/proj", Kind: "tar"})
	if err != nil || out.SHA256 != sum(out.Data) || !slices.Equal(out.Skipped, []string{"fifo"}) {
		t.Fatalf("get tar: %+v %v; want the archive, the FIFO skipped", out, err)
	}
	got := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(out.Data))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = fmt.Sprintf("%c %s%s", h.Typeflag, b, h.Linkname)
	}
	want := map[string]string{"link": "2 /etc/hostname", "sub/": "5 ", "sub/a.txt": "0 sub/a.txt", "top.txt": "0 top.txt"}
	if !maps.Equal(got, want) {
		t.Errorf("tree out: %v; want %v", got, want)
	}

	// Archives that would reach past the directory, refused whole.
	for _, bad := range []struct {
		what string
		h    *tar.Header
	}{
		{"a symlink entry", &tar.Header{Name: "ln", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}},
		{"a hard link entry", &tar.Header{Name: "hl", Typeflag: tar.TypeLink, Linkname: "top.txt"}},
		{"a device entry", &tar.Header{Name: "dev", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}},
		{"a name climbing out", &tar.Header{Name: "../escaped.txt", Typeflag: tar.TypeReg}},
		{"an absolute name", &tar.Header{Name: "/tmp/abs.txt", Typeflag: tar.TypeReg}},
	} {
		_, err := put(api.FilePutRequest{Path: "~/proj2", Data: archive(&tar.Header{Name: "first.txt", Typeflag: tar.TypeReg}, bad.h), Kind: "tar"})
		refused("tar with "+bad.what, err, aci.CodeBadRequest)
	}
	if got := sh(`ls -A ~/proj2 2>&1; ls ~/escaped.txt /tmp/abs.txt 2>/dev/null`); !strings.Contains(got, "No such file") {
		t.Errorf("a refused archive left %q; want nothing written", got)
	}
	_, err = put(api.FilePutRequest{Path: "~/proj", Data: []byte("not a tar at all, just bytes"), Kind: "tar"})
	refused("put of a non-archive", err, aci.CodeBadRequest)
	_, err = put(api.FilePutRequest{Path: "~/proj", Data: tree, Kind: "zip"})
	refused("an unknown kind", err, aci.CodeBadRequest)
	many := make([]*tar.Header, wire.MaxTreeEntries+1)
	for i := range many {
		many[i] = &tar.Header{Name: fmt.Sprintf("d%d/", i), Typeflag: tar.TypeDir}
	}
	_, err = put(api.FilePutRequest{Path: "~/many", Data: archive(many...), Kind: "tar"})
	refused("an archive of too many entries", err, aci.CodeTooLarge)

	// A link the agent planted inside the target directory: a put through
	// it fails and the link's target is untouched.
	sh(`mkdir -p ~/outside ~/proj3 && ln -s ~/outside ~/proj3/sub`)
	_, err = put(api.FilePutRequest{Path: "~/proj3", Data: tree, Kind: "tar"})
	refused("tar through a planted link", err, aci.CodeBadRequest)
	_, err = put(api.FilePutRequest{Path: "~/proj3", Data: archive(&tar.Header{Name: "sub/deeper/x.txt", Typeflag: tar.TypeReg}), Kind: "tar"})
	refused("a file entry below a planted link", err, aci.CodeBadRequest)
	sh(`ln -s ~/outside ~/proj4`)
	_, err = put(api.FilePutRequest{Path: "~/proj4/in", Data: tree, Kind: "tar"})
	refused("tar whose own path climbs a planted link", err, aci.CodeBadRequest)
	if got := sh(`ls -A ~/outside`); got != "" {
		t.Errorf("a put through a planted link wrote %q into its target", got)
	}

	// Directory bombs: too many entries, too deep.
	sh(`mkdir ~/bomb && cd ~/bomb && seq 1 5000 | xargs touch`)
	_, err = get(api.FileGetRequest{Path: "~/bomb", Kind: "tar"})
	refused("get of 5000 entries", err, aci.CodeTooLarge)
	sh(`mkdir -p ~/deep/$(printf 'd/%.0s' $(seq 1 80))`)
	_, err = get(api.FileGetRequest{Path: "~/deep", Kind: "tar"})
	refused("get of a tree 80 deep", err, aci.CodeTooLarge)
	_, err = get(api.FileGetRequest{Path: "~/proj/link", Kind: "tar"})
	refused("tar of a link", err, aci.CodeBadRequest)
	if d := time.Since(t0); d > 60*time.Second {
		t.Errorf("the tree gets took %v; want answers at once", d)
	}

	// A file of three chunks in, in order; then out in chunks.
	big := bytes.Repeat([]byte("0123456789abcdef"), (wire.MaxGetFile*5/2)/16)
	third := len(big) / 3
	chunks := [][]byte{big[:third], big[third : 2*third], big[2*third:]}
	if _, err := put(api.FilePutRequest{Path: "~/big.bin", Data: chunks[0]}); err != nil {
		t.Fatal(err)
	}
	_, err = put(api.FilePutRequest{Path: "~/big.bin", Data: chunks[2], Offset: int64(2 * third)})
	refused("a chunk out of order", err, aci.CodeBadRequest)
	_, err = put(api.FilePutRequest{Path: "~/big.bin", Data: chunks[1], Offset: int64(third), SHA256: sum(chunks[2])})
	refused("a chunk with a wrong sha256", err, aci.CodeChecksumMismatch)
	_, err = put(api.FilePutRequest{Path: "~/none.bin", Data: chunks[1], Offset: int64(third)})
	refused("a chunk of a file not started", err, aci.CodeNotFound)
	for i := 1; i < 3; i++ {
		if _, err := put(api.FilePutRequest{Path: "~/big.bin", Data: chunks[i], Offset: int64(i * third)}); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	if got := strings.Fields(sh(`sha256sum ~/big.bin`)); len(got) == 0 || got[0] != sum(big) {
		t.Errorf("the chunked file's sha256 %v; want %s", got, sum(big))
	}
	var back []byte
	for off := int64(0); ; {
		c, err := get(api.FileGetRequest{Path: "~/big.bin", Offset: off, Length: wire.MaxGetFile})
		if err != nil {
			t.Fatalf("get chunk at %d: %v", off, err)
		}
		if c.SHA256 != sum(c.Data) || c.Total != int64(len(big)) {
			t.Fatalf("chunk at %d: sha %s total %d", off, c.SHA256, c.Total)
		}
		back = append(back, c.Data...)
		if off += int64(len(c.Data)); off >= c.Total || len(c.Data) == 0 {
			break
		}
	}
	if !bytes.Equal(back, big) {
		t.Errorf("chunked get: %d bytes back of %d, equal %v", len(back), len(big), bytes.Equal(back, big))
	}
	_, err = get(api.FileGetRequest{Path: "~/big.bin"})
	refused("a whole get past the bound", err, aci.CodeTooLarge)
	_, err = get(api.FileGetRequest{Path: "~/big.bin", Length: wire.MaxGetFile + 1})
	refused("a chunk past the bound", err, aci.CodeBadRequest)
	sh(`mkfifo ~/pipe`)
	_, err = get(api.FileGetRequest{Path: "~/pipe", Length: 10})
	refused("a chunk of a FIFO", err, aci.CodeBadRequest)
}
