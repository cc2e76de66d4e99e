package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/shinken-rl/shinken/internal/procstat"
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

// sweep removes the containers and snapshot images of this run when own
// is set (Close); else, at New, the orphans of dead servers: those of every
// other run of this instance (a crashed predecessor with the same state
// dir), and those any instance made whose owner process (LabelOwner) has
// ended — a killed server's containers, which nothing else would end.
func (p *Provider) sweep(ctx context.Context, own bool) error {
	mine := func(labels map[string]string) bool {
		if own {
			return labels[LabelRun] == p.run
		}
		if labels[LabelInstance] == p.opts.Instance && labels[LabelRun] != p.run {
			return true
		}
		return ownerGone(labels[LabelOwner])
	}
	f := filters.NewArgs(filters.Arg("label", LabelManaged+"=true"))
	if own {
		f = p.labelFilter()
	}
	cs, err := p.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
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
		ims, err := p.cli.ImageList(ctx, image.ListOptions{All: true, Filters: f})
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

// ownerLabel is LabelOwner's value for this process: its pid namespace,
// pid and start time ("" when /proc cannot tell).
func ownerLabel() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	st, err := procstat.Read(os.Getpid())
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s %d %d", ns, os.Getpid(), st.Start)
}

// ownerGone says whether the owner a LabelOwner names has ended: it lived
// in this process's pid namespace and its pid now names no process, or
// another one. An owner in another pid namespace (a server in a container
// of its own) is never judged from here.
func ownerGone(owner string) bool {
	var ns string
	var pid int
	var start uint64
	if n, _ := fmt.Sscanf(owner, "%s %d %d", &ns, &pid, &start); n != 3 || pid <= 0 {
		return false
	}
	if self, err := os.Readlink("/proc/self/ns/pid"); err != nil || self != ns {
		return false
	}
	st, err := procstat.Read(pid)
	return err != nil || st.Start != start || st.Gone()
}
