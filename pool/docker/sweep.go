package docker

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
)

// retry runs f up to 5 times with a growing pause while it fails and ctx
// allows, returning the last error.
func retry(ctx context.Context, f func() error) error {
	pause := 50 * time.Millisecond
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if err = f(); err == nil {
			return nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
		pause *= 2
	}
	return err
}

// removeContainer force-removes a container; one already gone is success.
// Transient failures (a removal already in progress, a busy engine) are
// retried.
func (p *Provider) removeContainer(ctx context.Context, id string) error {
	return retry(ctx, func() error {
		err := p.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("docker provider: remove container %.12s: %w", id, err)
		}
		return nil
	})
}

// labelFilter selects what this package made for this instance.
func (p *Provider) labelFilter() filters.Args {
	return filters.NewArgs(
		filters.Arg("label", LabelManaged+"=true"),
		filters.Arg("label", LabelInstance+"="+p.opts.Instance),
	)
}

// sweep removes the containers and snapshot images of this instance: those
// of this run when own is set (Close), else those of every other run (the
// orphans a crashed run left, at New).
func (p *Provider) sweep(ctx context.Context, own bool) error {
	mine := func(labels map[string]string) bool { return (labels[LabelRun] == p.run) == own }
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: p.labelFilter()})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	var errs []error
	for _, c := range cs {
		if mine(c.Labels) {
			errs = append(errs, p.removeContainer(ctx, c.ID))
		}
	}
	// Images: children before parents. A parent still has a child for a
	// pass or so; keep passing while something gets removed.
	for {
		ims, err := p.cli.ImageList(ctx, image.ListOptions{All: true, Filters: p.labelFilter()})
		if err != nil {
			return errors.Join(append(errs, fmt.Errorf("list images: %w", err))...)
		}
		sort.Slice(ims, func(i, j int) bool { return ims[i].Created > ims[j].Created })
		removed, left := 0, 0
		var last error
		for _, im := range ims {
			if !mine(im.Labels) {
				continue
			}
			_, err := p.cli.ImageRemove(ctx, im.ID, image.RemoveOptions{PruneChildren: true})
			switch {
			case err == nil || cerrdefs.IsNotFound(err):
				removed++
			default:
				left++
				last = fmt.Errorf("remove image %.19s: %w", im.ID, err)
			}
		}
		if left == 0 {
			break
		}
		if removed == 0 {
			errs = append(errs, last)
			break
		}
	}
	return errors.Join(errs...)
}
