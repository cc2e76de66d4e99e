package trajectory

import (
	"fmt"
	"sync"
	"testing"
)

// BenchmarkJournalReply measures the durability cost of one step reply that
// advanced 16 episodes by one step each: the journal's way (16 appends, then
// one concurrent sync of the 16 journals, as the server does per reply)
// against syncing after every append one by one, and against rewriting each
// whole episode crash-safe (Save) at every step.
func BenchmarkJournalReply(b *testing.B) {
	const envs = 16
	step := newTraj("x", 1, false).Steps[0]
	step.PromptIDs = make([]int, 2000)
	open := func(b *testing.B) (*Store, []*Journal) {
		s, err := NewStore(b.TempDir(), StoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		js := make([]*Journal, envs)
		for i := range js {
			if js[i], err = s.OpenJournal(newTraj(fmt.Sprintf("ep-%d", i), 0, false)); err != nil {
				b.Fatal(err)
			}
		}
		return s, js
	}
	b.Run("journal_sync_per_reply", func(b *testing.B) {
		_, js := open(b)
		for b.Loop() {
			for _, j := range js {
				if err := j.Append(&step); err != nil {
					b.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for _, j := range js {
				wg.Go(func() {
					if err := j.Sync(); err != nil {
						b.Error(err)
					}
				})
			}
			wg.Wait()
		}
	})
	b.Run("journal_sync_per_step_serial", func(b *testing.B) {
		_, js := open(b)
		for b.Loop() {
			for _, j := range js {
				if err := j.Append(&step); err != nil {
					b.Fatal(err)
				}
				if err := j.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("save_whole_episode_per_step", func(b *testing.B) {
		s, _ := open(b)
		trs := make([]*Trajectory, envs)
		for i := range trs {
			trs[i] = newTraj(fmt.Sprintf("ep-%d", i), 0, false)
		}
		n := 0
		for b.Loop() {
			for _, t := range trs {
				if n < 30 { // an episode grows to 30 steps, then starts over
					t.Steps = append(t.Steps, step)
				} else {
					t.Steps = t.Steps[:1]
				}
				if err := s.Save(t); err != nil {
					b.Fatal(err)
				}
			}
			n = (n + 1) % 31
		}
	})
}
