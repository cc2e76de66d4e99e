package rollout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
	"golang.org/x/sync/errgroup"
)

// EnvAPI is the trainer API the runner drives: one server (*Client) or
// several (*Servers).
type EnvAPI interface {
	Spec(ctx context.Context) (*api.Spec, error)
	Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error)
	Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error)
	Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error)
	Close(ctx context.Context, envIDs ...string) error
	Episode(ctx context.Context, id string) (*trajectory.Trajectory, error)
}

// Servers spreads envs over several env servers that serve the same tasks.
//
// A new env goes to the reachable server with the smallest share of its
// pool (/v1/spec pool.size) already held through this value, the lowest
// index on a tie; an env then stays on its server (every call with its id
// goes there) and a fork's children stay on their parent's server. A server
// that cannot be dialed is left out of placement for ReviveAfter, a new env
// whose reset could not be sent is placed on another server, and the calls
// of envs already on it fail with a sandbox_died error naming the server:
// their state went with it, so the runner retries those jobs on fresh envs.
//
// The set of servers may grow (K8sServers adds the pods it finds); a server
// is never removed, only left out of placement, so indices stay valid.
type Servers struct {
	token   string
	hc      *http.Client
	clients []*Client // under mu: appended to
	urls    []string
	// ReviveAfter is how long an unreachable server stays out of placement.
	ReviveAfter time.Duration

	mu        sync.Mutex
	placement map[string]int // env id → server
	episodes  map[string]int // episode id → server
	down      map[int]time.Time
	sizes     map[int]int           // pool sizes read from /v1/spec
	pending   []int                 // per server: new envs placed whose reset has not answered
	gone      map[int]bool          // servers out of placement until found again (K8sServers)
	dead      map[string]*aci.Error // env id → why: its server went away under it
	onLoss    func(i int)           // called when server i fails under a request
}

// NewServers returns a client of the servers at urls (one token for all).
func NewServers(urls []string, token string, hc *http.Client) (*Servers, error) {
	if len(urls) == 0 {
		return nil, errors.New("rollout: no server URLs")
	}
	s := newServers(token, hc)
	for _, u := range urls {
		s.add(u)
	}
	return s, nil
}

func newServers(token string, hc *http.Client) *Servers {
	return &Servers{token: token, hc: hc, ReviveAfter: 10 * time.Second, placement: map[string]int{},
		episodes: map[string]int{}, down: map[int]time.Time{}, sizes: map[int]int{}, gone: map[int]bool{},
		dead: map[string]*aci.Error{}}
}

// add appends a server and returns its index.
func (s *Servers) add(u string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clients = append(s.clients, NewClient(u, s.token, s.hc))
	s.urls = append(s.urls, u)
	s.pending = append(s.pending, 0)
	return len(s.clients) - 1
}

// client is server i's client.
func (s *Servers) client(i int) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clients[i]
}

// snapshot is the clients now known.
func (s *Servers) snapshot() []*Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Client(nil), s.clients...)
}

// URLs returns the base URL of every server known, by index.
func (s *Servers) URLs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.urls...)
}

// InPlacement returns the URLs of the servers new envs may go to now: not
// left out as gone, not down within ReviveAfter.
func (s *Servers) InPlacement() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, u := range s.urls {
		if s.placeable(i) {
			out = append(out, u)
		}
	}
	return out
}

// placeable reports whether server i may take new envs (s.mu held).
func (s *Servers) placeable(i int) bool {
	if s.gone[i] {
		return false
	}
	t, ok := s.down[i]
	return !ok || time.Since(t) >= s.ReviveAfter
}

// Load returns how many envs this value holds on each server.
func (s *Servers) Load() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := make([]int, len(s.clients))
	for _, i := range s.placement {
		n[i]++
	}
	return n
}

// ServerOf returns the index of the server holding envID, or -1.
func (s *Servers) ServerOf(envID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.placement[envID]; ok {
		return i
	}
	return -1
}

// deadErr is the error of an env whose server went away under it, or nil.
func (s *Servers) deadErr(envID string) *aci.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead[envID]
}

// dropEnvs records every env placed on server i as lost (its server stopped
// or was replaced: the envs are gone even if the same address answers
// again) and returns how many there were.
func (s *Servers) dropEnvs(i int, e *aci.Error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for id, j := range s.placement {
		if j == i {
			delete(s.placement, id)
			s.dead[id] = e
			n++
		}
	}
	if len(s.dead) > 1<<16 { // bounded: the oldest answers not_found instead
		for id := range s.dead {
			delete(s.dead, id)
			if len(s.dead) <= 1<<15 {
				break
			}
		}
	}
	return n
}

// dropIDs records the envs ids as lost with e.
func (s *Servers) dropIDs(ids []string, e *aci.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		delete(s.placement, id)
		s.dead[id] = e
	}
}

// Spec is the first reachable server's spec.
func (s *Servers) Spec(ctx context.Context) (*api.Spec, error) {
	var last error
	for i, c := range s.snapshot() {
		sp, err := c.Spec(ctx)
		if err == nil {
			s.mu.Lock()
			s.sizes[i] = sp.Pool.Size
			s.mu.Unlock()
			return sp, nil
		}
		s.markDown(i, err)
		last = err
	}
	return nil, last
}

// Reset restarts placed envs on their servers and leases new ones on the
// servers with the most room.
func (s *Servers) Reset(ctx context.Context, req *api.ResetRequest) (*api.BatchReply, error) {
	out := &api.BatchReply{Results: make([]api.Result, len(req.Envs)), Frames: map[string][]byte{}}
	route := map[int][]int{}
	var fresh []int
	for k, e := range req.Envs {
		if e.EnvID == "" {
			fresh = append(fresh, k)
			continue
		}
		i := s.ServerOf(e.EnvID)
		if i < 0 {
			out.Results[k] = api.Result{EnvID: e.EnvID, Error: s.unplaced(e.EnvID)}
			continue
		}
		route[i] = append(route[i], k)
	}
	for round := 0; round <= len(s.snapshot()); round++ {
		var placed []int
		for _, k := range fresh {
			i, err := s.place(ctx)
			if err != nil {
				s.unpend(placed)
				return nil, err
			}
			placed = append(placed, i)
			route[i] = append(route[i], k)
		}
		if len(route) == 0 {
			break
		}
		fresh = s.sendResets(ctx, route, req, out)
		s.unpend(placed)
		route = map[int][]int{}
	}
	return out, nil
}

// sendResets sends each server its part and returns the new envs whose
// server could not be dialed (to place again).
func (s *Servers) sendResets(ctx context.Context, route map[int][]int, req *api.ResetRequest, out *api.BatchReply) []int {
	type part struct {
		rep *api.BatchReply
		err error
	}
	parts := make(map[int]*part, len(route))
	var g errgroup.Group
	var mu sync.Mutex
	for i, ks := range route {
		sub := &api.ResetRequest{Observe: req.Observe, Have: req.Have}
		for _, k := range ks {
			sub.Envs = append(sub.Envs, req.Envs[k])
		}
		g.Go(func() error {
			rep, err := s.client(i).Reset(ctx, sub)
			mu.Lock()
			parts[i] = &part{rep, err}
			mu.Unlock()
			return nil
		})
	}
	g.Wait()
	var again []int
	for i, ks := range route {
		p := parts[i]
		if p.err != nil {
			dialed := s.markDown(i, p.err)
			for _, k := range ks {
				if req.Envs[k].EnvID == "" && dialed {
					again = append(again, k)
				} else {
					out.Results[k] = api.Result{EnvID: req.Envs[k].EnvID, Error: s.lost(i, p.err)}
				}
			}
			continue
		}
		s.merge(i, ks, p.rep, out)
	}
	return again
}

// Step runs each env's step on its server; a server that fails fails only
// its envs.
func (s *Servers) Step(ctx context.Context, req *api.StepRequest) (*api.BatchReply, error) {
	out := &api.BatchReply{Results: make([]api.Result, len(req.Steps)), Frames: map[string][]byte{}}
	route := map[int][]int{}
	for k, st := range req.Steps {
		i := s.ServerOf(st.EnvID)
		if i < 0 {
			out.Results[k] = api.Result{EnvID: st.EnvID, Error: s.unplaced(st.EnvID)}
			continue
		}
		route[i] = append(route[i], k)
	}
	var g errgroup.Group
	var mu sync.Mutex
	for i, ks := range route {
		sub := &api.StepRequest{Observe: req.Observe, Have: req.Have}
		for _, k := range ks {
			sub.Steps = append(sub.Steps, req.Steps[k])
		}
		g.Go(func() error {
			rep, err := s.client(i).Step(ctx, sub)
			if err != nil {
				var ae *aci.Error
				if errors.As(err, &ae) {
					return err // a whole-request refusal: the request's fault, not the server's
				}
				s.markDown(i, err)
				lost := s.lost(i, err)
				mu.Lock()
				var ids []string
				for _, k := range ks {
					out.Results[k] = api.Result{EnvID: req.Steps[k].EnvID, Error: lost}
					ids = append(ids, req.Steps[k].EnvID)
				}
				mu.Unlock()
				s.dropIDs(ids, lost) // their step's outcome is unknown: later calls fail alike
				return nil
			}
			mu.Lock()
			s.merge(i, ks, rep, out)
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if len(req.Steps) == 1 && out.Results[0].Error != nil && isLost(out.Results[0].Error) {
		return nil, out.Results[0].Error // one env: its server's loss is the call's
	}
	return out, nil
}

// Fork forks on the parent's server; the children stay there.
func (s *Servers) Fork(ctx context.Context, req *api.ForkRequest) (*api.BatchReply, error) {
	i := s.ServerOf(req.EnvID)
	if i < 0 {
		return nil, s.unplaced(req.EnvID)
	}
	rep, err := s.client(i).Fork(ctx, req)
	if err != nil {
		var ae *aci.Error
		if !errors.As(err, &ae) {
			s.markDown(i, err)
			return nil, s.lost(i, err)
		}
		return nil, err
	}
	ks := make([]int, len(rep.Results))
	for k := range ks {
		ks[k] = k
	}
	out := &api.BatchReply{Results: make([]api.Result, len(rep.Results)), Frames: map[string][]byte{}}
	s.merge(i, ks, rep, out)
	return out, nil
}

// Close closes each env on its server.
func (s *Servers) Close(ctx context.Context, envIDs ...string) error {
	by := map[int][]string{}
	s.mu.Lock()
	for _, e := range envIDs {
		delete(s.dead, e)
		if i, ok := s.placement[e]; ok {
			by[i] = append(by[i], e)
			delete(s.placement, e)
		}
	}
	s.mu.Unlock()
	var errs []error
	for i, ids := range by {
		if err := s.client(i).Close(ctx, ids...); err != nil {
			s.markDown(i, err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Episode fetches a trajectory from the server that ran it.
func (s *Servers) Episode(ctx context.Context, id string) (*trajectory.Trajectory, error) {
	s.mu.Lock()
	i, ok := s.episodes[id]
	s.mu.Unlock()
	if ok {
		return s.client(i).Episode(ctx, id)
	}
	var last error
	for _, c := range s.snapshot() {
		t, err := c.Episode(ctx, id)
		if err == nil {
			return t, nil
		}
		last = err
	}
	return nil, last
}

// merge copies server i's results into out at positions ks and records
// where the envs and episodes live.
func (s *Servers) merge(i int, ks []int, rep *api.BatchReply, out *api.BatchReply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for j, k := range ks {
		if j >= len(rep.Results) {
			out.Results[k] = api.Result{Error: &aci.Error{Code: aci.CodeInternal, Message: "server returned too few results"}}
			continue
		}
		r := rep.Results[j]
		out.Results[k] = r
		if r.EnvID != "" && r.Error == nil {
			s.placement[r.EnvID] = i
		}
		if r.EpisodeID != "" {
			s.episodes[r.EpisodeID] = i
		}
	}
	for h, b := range rep.Frames {
		out.Frames[h] = b
	}
	if len(s.episodes) > 1<<16 { // bounded: older episodes are asked of every server
		for id := range s.episodes {
			delete(s.episodes, id)
			if len(s.episodes) <= 1<<15 {
				break
			}
		}
	}
}

// place picks the server for one new env.
func (s *Servers) place(ctx context.Context) (int, error) {
	s.mu.Lock()
	var need []int
	for i := range s.clients {
		if _, ok := s.sizes[i]; !ok && !s.gone[i] {
			need = append(need, i)
		}
	}
	s.mu.Unlock()
	for _, i := range need {
		if sp, err := s.client(i).Spec(ctx); err == nil {
			s.mu.Lock()
			s.sizes[i] = sp.Pool.Size
			s.mu.Unlock()
		} else {
			s.markDown(i, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	load := append([]int{}, s.pending...)
	for _, i := range s.placement {
		load[i]++
	}
	best := -1
	var bestShare float64
	for i := range s.clients {
		if !s.placeable(i) {
			continue
		}
		size := max(1, s.sizes[i])
		share := float64(load[i]) / float64(size)
		if best < 0 || share < bestShare {
			best, bestShare = i, share
		}
	}
	if best < 0 {
		return 0, &aci.Error{Code: aci.CodePoolExhausted, Message: "no env server is reachable"}
	}
	delete(s.down, best)
	s.pending[best]++
	return best, nil
}

func (s *Servers) unpend(servers []int) {
	s.mu.Lock()
	for _, i := range servers {
		s.pending[i]--
	}
	s.mu.Unlock()
}

// markDown records a dial failure of server i and reports whether err was
// one (the request was never sent).
func (s *Servers) markDown(i int, err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		return false
	}
	s.mu.Lock()
	s.down[i] = time.Now()
	hook := s.onLoss
	s.mu.Unlock()
	// Nothing listens there: its sandboxes went with the process, so its
	// envs are lost even if a new server takes the address.
	s.dropEnvs(i, s.lostErr(i, err))
	if hook != nil {
		hook(i)
	}
	return true
}

// lost is the typed error of an env whose server failed under it.
func (s *Servers) lost(i int, err error) *aci.Error {
	s.mu.Lock()
	hook := s.onLoss
	s.mu.Unlock()
	if hook != nil {
		hook(i)
	}
	return s.lostErr(i, err)
}

func (s *Servers) lostErr(i int, err error) *aci.Error {
	s.mu.Lock()
	u := s.urls[i]
	s.mu.Unlock()
	return &aci.Error{Code: aci.CodeSandboxDied, Message: fmt.Sprintf("env server %s lost: %v", u, err),
		Detail: map[string]any{"server": u}}
}

func isLost(e *aci.Error) bool {
	d, ok := e.Detail.(map[string]any)
	return ok && e.Code == aci.CodeSandboxDied && d["server"] != nil
}

// unplaced is the error of an env this value does not hold: lost with its
// server (sandbox_died), or never placed by it (not_found).
func (s *Servers) unplaced(envID string) *aci.Error {
	if e := s.deadErr(envID); e != nil {
		return e
	}
	return &aci.Error{Code: aci.CodeNotFound, Message: "env " + envID + " was not placed by this client"}
}
