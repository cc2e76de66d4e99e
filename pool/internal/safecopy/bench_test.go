package safecopy

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// benchTree makes a tree of 64 files of 256 KiB (16 MiB of data) and one
// 1 GiB sparse file holding 4 KiB of data.
func benchTree(b *testing.B) string {
	b.Helper()
	src := filepath.Join(b.TempDir(), "home")
	if err := os.MkdirAll(filepath.Join(src, "d"), 0o755); err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte{7}, 256<<10)
	for i := range 64 {
		if err := os.WriteFile(filepath.Join(src, "d", strconv.Itoa(i)), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	f, err := os.Create(filepath.Join(src, "sparse"))
	if err != nil {
		b.Fatal(err)
	}
	f.Truncate(1 << 30)
	f.WriteAt(data[:4096], 1<<29)
	f.Close()
	return src
}

// BenchmarkCopy compares the descriptor walk (holes kept, capped) with the
// naive copy it replaced (filepath.Walk + io.Copy, which writes every hole
// out as zeros) on the same tree, in one run: read the ratio of the two.
func BenchmarkCopy(b *testing.B) {
	src := benchTree(b)
	b.Run("safecopy", func(b *testing.B) {
		for b.Loop() {
			dst := filepath.Join(b.TempDir(), "c")
			c := &Copy{Ctx: context.Background(), UID: -1, GID: -1, Max: DefaultMax}
			if err := c.Tree(filepath.Dir(src), "home", dst); err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(dst)
		}
	})
	b.Run("naive_io_copy", func(b *testing.B) {
		for b.Loop() {
			dst := filepath.Join(b.TempDir(), "c")
			err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(src, path)
				to := filepath.Join(dst, rel)
				if info.IsDir() {
					return os.MkdirAll(to, 0o755)
				}
				in, err := os.Open(path)
				if err != nil {
					return err
				}
				defer in.Close()
				out, err := os.Create(to)
				if err != nil {
					return err
				}
				defer out.Close()
				_, err = io.Copy(struct{ io.Writer }{out}, struct{ io.Reader }{in})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			os.RemoveAll(dst)
		}
	})
}
