package trajectory

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSave compares a crash-safe Save (temp, fsync, rename, fsync dir)
// of a 15-step episode with a plain os.WriteFile of the same bytes, the
// baseline that is not crash-safe.
func BenchmarkSave(b *testing.B) {
	tr := newTraj("bench-ep", 15, true)
	for i := range tr.Steps {
		tr.Steps[i].PromptIDs = make([]int, 2000)
		tr.Steps[i].ResponseIDs = make([]int, 200)
	}
	b.Run("baseline_writefile", func(b *testing.B) {
		dir := b.TempDir()
		data, _ := jsonBytes(tr)
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := os.WriteFile(filepath.Join(dir, "x.json"), data, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("store_save", func(b *testing.B) {
		s, err := NewStore(b.TempDir(), StoreOptions{})
		if err != nil {
			b.Fatal(err)
		}
		data, _ := jsonBytes(tr)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Save(tr); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkVerlRow(b *testing.B) {
	tr := newTraj("bench-ep", 0, true)
	var ctx []int
	for i := range 15 {
		ctx = append(ctx, make([]int, 300)...) // env tokens for this turn
		prompt := append([]int(nil), ctx...)
		resp := make([]int, 200)
		for j := range resp {
			resp[j] = i*1000 + j
		}
		tr.Steps = append(tr.Steps, Step{Index: i, PromptIDs: prompt, ResponseIDs: resp})
		ctx = append(ctx, resp...)
	}
	tr.NumTurns = 15
	b.ReportAllocs()
	for b.Loop() {
		row, err := VerlRow(tr)
		if err != nil || row.ExtraFields[FieldTokenDrift] != false {
			b.Fatal(fmt.Sprint(err, row.ExtraFields))
		}
	}
}

func jsonBytes(t *Trajectory) ([]byte, error) { return json.Marshal(t) }
