package main

import (
	"context"

	"klab/guest/proto"
	"klab/images/debian"
	"klab/images/userspace"
	"klab/lab"
)

// defaultUserspace is klab boot --userspace's value when given alone.
const defaultUserspace = "default"

// attachUserspace gives req the userspace that o.userspace names (the
// default one, built when missing, or a cached image by id) and runs the
// command chrooted into it. The kernel is resolved first: whether
// virtio-blk is a module decides what the initramfs loads.
func (o *bootOptions) attachUserspace(ctx context.Context, g *globalOptions, lo *lab.Options, req *lab.BootRequest) error {
	var img *userspace.Image
	var err error
	if o.userspace == defaultUserspace {
		img, err = userspace.Build(ctx, userspace.Spec{}, userspace.Options{
			Debian: debian.Options{Mirror: g.mirror, CacheDir: g.cacheDir}, Progress: o.errOut,
		})
		if err != nil {
			return err
		}
	} else if img, err = userspace.Load(g.cacheDir, o.userspace); err != nil {
		return badInput(err)
	}
	k := req.Resolved
	if k == nil {
		if k, err = lo.ResolveKernel(ctx, req.Kernel); err != nil {
			return err
		}
		req.Resolved = k
	}
	att, err := userspace.Attach(img, k)
	if err != nil {
		return badInput(err)
	}
	req.QEMUArgs = append(req.QEMUArgs, att.QEMUArgs...)
	req.Modules = append(req.Modules, att.Modules...)
	req.Steps = append([]proto.Step{att.Step}, req.Steps...)
	req.Root, req.Dir = userspace.GuestRoot, ""
	return nil
}
