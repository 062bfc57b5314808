package main

import (
	"context"
	"io"

	"klab/guest/proto"
	"klab/images/debian"
	"klab/images/userspace"
	"klab/lab"
	"klab/results"
)

// defaultUserspace is klab boot --userspace's value when given alone.
const defaultUserspace = "default"

// attachUserspace gives req the userspace that o.userspace names (the
// default one, built when missing, or a cached image by id) and runs the
// command chrooted into it. The kernel is resolved first: whether
// virtio-blk is a module decides what the initramfs loads.
func (o *bootOptions) attachUserspace(ctx context.Context, g *globalOptions, lo *lab.Options, req *lab.BootRequest) error {
	att, k, err := userspaceAttachment(ctx, g, lo, o.userspace, req.Kernel, req.Resolved, o.errOut)
	if err != nil {
		return err
	}
	req.Resolved = k
	req.QEMUArgs = append(req.QEMUArgs, att.QEMUArgs...)
	req.Modules = append(req.Modules, att.Modules...)
	req.Steps = append([]proto.Step{att.Step}, req.Steps...)
	req.Root, req.Dir = userspace.GuestRoot, ""
	return nil
}

// userspaceAttachment returns how to give the kernel ref (resolved here
// unless k is already) the userspace that name names: defaultUserspace,
// built when missing, or the id of a cached image. It returns the
// resolved kernel too.
func userspaceAttachment(ctx context.Context, g *globalOptions, lo *lab.Options, name, ref string, k *results.Kernel, progress io.Writer) (*userspace.Attachment, *results.Kernel, error) {
	var img *userspace.Image
	var err error
	if name == defaultUserspace {
		if img, err = g.defaultUserspaceImage(progress)(ctx); err != nil {
			return nil, nil, err
		}
	} else if img, err = userspace.Load(g.cacheDir, name); err != nil {
		return nil, nil, badInput(err)
	}
	if k == nil {
		if k, err = lo.ResolveKernel(ctx, ref); err != nil {
			return nil, nil, err
		}
	}
	att, err := userspace.Attach(img, k)
	if err != nil {
		return nil, nil, badInput(err)
	}
	return att, k, nil
}

// defaultUserspaceImage returns what gives an experiment the default
// userspace (checks with userspace: true), built when missing, with its
// progress on progress.
func (g *globalOptions) defaultUserspaceImage(progress io.Writer) func(context.Context) (*userspace.Image, error) {
	return func(ctx context.Context) (*userspace.Image, error) {
		return userspace.Build(ctx, userspace.Spec{}, userspace.Options{
			Debian: debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir}, Progress: progress,
		})
	}
}
