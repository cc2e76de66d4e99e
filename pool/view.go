package pool

import "sort"

// SandboxView is one live sandbox as an operator sees it: its id, whether it
// is warm (general, idle), a replica (idle, seeded from a task's golden
// checkpoint) or leased, and the golden key of a replica.
type SandboxView struct {
	ID     string `json:"id"`
	State  string `json:"state"` // warm | replica | leased
	Golden string `json:"golden,omitempty"`
}

// Sandboxes lists the pool's live sandboxes, sorted by id. Boots in flight
// have no sandbox yet and are counted in Stats().Booting instead.
func (p *Pool) Sandboxes() []SandboxView {
	p.mu.Lock()
	out := make([]SandboxView, 0, len(p.warm)+len(p.leased))
	for _, m := range p.warm {
		out = append(out, SandboxView{ID: m.sb.ID, State: "warm"})
	}
	for l := range p.leased {
		out = append(out, SandboxView{ID: l.m.sb.ID, State: "leased"})
	}
	for key, g := range p.goldens {
		for _, m := range g.idle {
			out = append(out, SandboxView{ID: m.sb.ID, State: "replica", Golden: key})
		}
	}
	p.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Spec is the sandbox every boot asks for, with the defaults filled in.
func (p *Pool) Spec() Spec {
	s := p.cfg.Spec
	if s.Width == 0 || s.Height == 0 {
		s.Width, s.Height = 1280, 800
	}
	if s.Depth == 0 {
		s.Depth = 24
	}
	return s
}
