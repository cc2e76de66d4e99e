package envserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/guest/wire"
	"github.com/shinken-rl/shinken/trajectory"
)

// Trainer files (docs/api.md, "Trainer files"): POST /v1/files/put writes a
// file into an env's sandbox and POST /v1/files/get reads one, both with
// the agent's rights (guestd takes the agent's filesystem identity for the
// call: a link the agent planted leads nowhere the agent could not write or
// read itself, and a get follows no link below the home, opens no FIFO and
// reads at most wire.MaxGetFile bytes). Each side checks the bytes' sha256;
// the trajectory records each transfer by path, hash and size.

// serveFiles answers POST /v1/files/put and /v1/files/get.
func (s *Server) serveFiles(ctx *fasthttp.RequestCtx, c codec, path string) {
	switch {
	case !ctx.IsPost():
		s.writeError(ctx, c, aci.Errorf(aci.CodeBadRequest, "%s needs POST", path))
		return
	case len(ctx.PostBody()) > s.cfg.MaxBodyBytes:
		s.writeError(ctx, c, aci.Errorf(aci.CodePayloadTooLarge, "body over %d bytes", s.cfg.MaxBodyBytes))
		return
	}
	var (
		reply *api.FileReply
		err   error
	)
	switch path {
	case "/v1/files/put":
		var req api.FilePutRequest
		if err = c.decodeWithin(ctx.PostBody(), &req, &s.lim); err == nil {
			reply, err = s.putFile(s.ctx, &req)
		}
	case "/v1/files/get":
		var req api.FileGetRequest
		if err = c.decodeWithin(ctx.PostBody(), &req, &s.lim); err == nil {
			reply, err = s.getFile(s.ctx, &req)
		}
	default:
		err = aci.Errorf(aci.CodeNotFound, "no route %s (want /v1/files/put or /v1/files/get)", path)
	}
	if err != nil {
		s.writeError(ctx, c, err)
		return
	}
	s.writeReply(ctx, c, reply)
}

// checkFilePath refuses a path that is neither absolute nor ~/ relative.
func checkFilePath(p string) error {
	if p == "" || !(strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~/")) || strings.ContainsRune(p, 0) {
		return aci.Errorf(aci.CodeBadRequest, "file path %q: want an absolute path or ~/...", p)
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// putFile writes req's data, whose sha256 it checks first.
func (s *Server) putFile(ctx context.Context, req *api.FilePutRequest) (*api.FileReply, error) {
	if err := checkFilePath(req.Path); err != nil {
		return nil, err
	}
	if len(req.Data) > wire.MaxPutFile {
		return nil, aci.Errorf(aci.CodeTooLarge, "put: %d bytes, over %d", len(req.Data), wire.MaxPutFile)
	}
	sum := sha256Hex(req.Data)
	if !strings.EqualFold(req.SHA256, sum) {
		return nil, aci.Errorf(aci.CodeChecksumMismatch, "put %s: the data's sha256 is %s, the request says %q", req.Path, sum, req.SHA256)
	}
	if req.Mode&^0o777 != 0 {
		return nil, aci.Errorf(aci.CodeBadRequest, "put %s: mode %o: permission bits only", req.Path, req.Mode)
	}
	if err := checkFileKind(req.Kind); err != nil {
		return nil, err
	}
	if req.Offset < 0 || (req.Offset > 0 && req.Kind != "") || req.Offset+int64(len(req.Data)) > wire.MaxPutFile {
		return nil, aci.Errorf(aci.CodeBadRequest, "put %s: offset %d: a file's chunk at 0..%d, and no offset with a kind", req.Path, req.Offset, wire.MaxPutFile)
	}
	e, err := s.betweenSteps(req.EnvID, "put")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
	defer cancel()
	t0 := time.Now()
	err = e.lease.Guest().PutFile(ctx, wire.PutFileArgs{Path: req.Path, Data: req.Data, Mode: req.Mode, Agent: true, Kind: req.Kind, Offset: req.Offset})
	ev := trajectory.Event{Kind: trajectory.EventPutFile, AfterStep: e.ep.step, TMS: t0.Sub(e.ep.start).Milliseconds(),
		Path: req.Path, FileKind: req.Kind, Offset: req.Offset, SHA256: sum, Size: len(req.Data), DurationMS: time.Since(t0).Milliseconds()}
	if err := s.endEvent(e, ev, err); err != nil {
		return nil, err
	}
	return &api.FileReply{EnvID: e.id, Path: req.Path, Kind: req.Kind, SHA256: sum, Size: len(req.Data), Offset: req.Offset}, nil
}

// getFile reads req's file with the agent's rights.
func (s *Server) getFile(ctx context.Context, req *api.FileGetRequest) (*api.FileReply, error) {
	if err := checkFilePath(req.Path); err != nil {
		return nil, err
	}
	if err := checkFileKind(req.Kind); err != nil {
		return nil, err
	}
	if req.Offset < 0 || req.Length < 0 || req.Length > wire.MaxGetFile || (req.Offset > 0 && req.Length == 0) || (req.Kind != "" && req.Length != 0) {
		return nil, aci.Errorf(aci.CodeBadRequest, "get %s: offset %d length %d: a chunk is 1..%d bytes from an offset ≥ 0, and a directory has none", req.Path, req.Offset, req.Length, wire.MaxGetFile)
	}
	e, err := s.betweenSteps(req.EnvID, "get")
	if err != nil {
		return nil, err
	}
	defer e.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.StepTimeout)
	defer cancel()
	t0 := time.Now()
	res, err := e.lease.Guest().GetFile(ctx, wire.GetFileArgs{Path: req.Path, Kind: req.Kind, Offset: req.Offset, Length: req.Length})
	ev := trajectory.Event{Kind: trajectory.EventGetFile, AfterStep: e.ep.step, TMS: t0.Sub(e.ep.start).Milliseconds(),
		Path: req.Path, FileKind: req.Kind, Offset: req.Offset, DurationMS: time.Since(t0).Milliseconds()}
	var data []byte
	if err == nil {
		data = nonNil(res.Data)
		ev.SHA256, ev.Size = sha256Hex(data), len(data)
	}
	if err := s.endEvent(e, ev, err); err != nil {
		return nil, err
	}
	return &api.FileReply{EnvID: e.id, Path: req.Path, Kind: req.Kind, Data: data, SHA256: ev.SHA256, Size: len(data),
		Offset: req.Offset, Total: res.Total, Skipped: res.Skipped}, nil
}

// checkFileKind refuses a transfer kind other than a file ("") or a
// directory's tar.
func checkFileKind(k string) error {
	if k != "" && k != wire.FileKindTar {
		return aci.Errorf(aci.CodeBadRequest, "file kind %q: want %q (a directory) or none (a file)", k, wire.FileKindTar)
	}
	return nil
}
