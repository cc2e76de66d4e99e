package docker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	dockerclient "github.com/docker/docker/client"
)

// TestNoEngine: New against an endpoint where no engine answers fails with
// ErrNoEngine, which callers use to tell "skip" from "broken".
func TestNoEngine(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "no-engine.sock")
	cli, err := dockerclient.NewClientWithOpts(dockerclient.WithHost("unix://"+sock), dockerclient.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	p, err := New(context.Background(), Options{GuestdPath: os.Args[0], // never run: New fails first
		Client: cli, Instance: "no-engine-test"})
	if err == nil {
		p.Close(context.Background())
		t.Fatal("New without an engine: got a provider; want ErrNoEngine")
	}
	if !errors.Is(err, ErrNoEngine) {
		t.Fatalf("New without an engine: got %v; want ErrNoEngine", err)
	}
}
