package envserver

import (
	"sync"

	"github.com/shinken-rl/shinken/aci"
	"github.com/shinken-rl/shinken/envserver/api"
	"github.com/shinken-rl/shinken/trajectory"
)

// journalStep appends rec, just recorded, to ep's journal; the journal is
// opened at the first step (its header then carries the reset frame). A
// failure is kept on the episode and reported by syncEpisodes.
func (s *Server) journalStep(ep *episode, rec *trajectory.Step) {
	if s.cfg.Store == nil {
		return
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.saveErr != nil {
		return
	}
	if ep.journal == nil {
		t := ep.traj
		j, err := s.cfg.Store.OpenJournal(&t)
		if err != nil {
			s.saveFailed(ep, err)
			return
		}
		ep.journal = j
		return
	}
	if err := ep.journal.Append(rec); err != nil {
		s.saveFailed(ep, err)
	}
}

// syncEpisodes makes the steps of one reply durable: every journal the
// reply advanced is synced once, concurrently. An env whose episode could
// not be saved gets the error in its slot's info (save_error); the step
// itself happened.
func (s *Server) syncEpisodes(envIDs func(i int) string, slots []slot) {
	if s.cfg.Store == nil {
		return
	}
	var wg sync.WaitGroup
	for i := range slots {
		s.mu.Lock()
		e := s.envs[envIDs(i)]
		s.mu.Unlock()
		if e == nil {
			continue
		}
		e.mu.Lock()
		ep := e.ep
		e.mu.Unlock()
		if ep == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ep.mu.Lock()
			err, j := ep.saveErr, ep.journal
			ep.mu.Unlock()
			if err == nil && j != nil {
				if err = j.Sync(); err != nil {
					ep.mu.Lock()
					s.saveFailed(ep, err)
					ep.mu.Unlock()
				}
			}
			if err == nil {
				return
			}
			if slots[i].res.Info == nil {
				slots[i].res.Info = &api.Info{}
			}
			slots[i].res.Info.SaveError = aci.Errorf(aci.CodeInternal, "episode %s not saved: %v", ep.traj.EpisodeID, err)
		}()
	}
	wg.Wait()
}
