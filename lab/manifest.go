package lab

import (
	"klab/images"
	"klab/results"
	"klab/vm"
)

// newManifest starts a run's manifest with what is known before boot.
func newManifest(run *results.Run, command []string, k *results.Kernel, ir *images.Initramfs, v vm.Verdict) *results.Manifest {
	return &results.Manifest{
		RunID:         run.ID,
		Command:       command,
		Kernel:        manifestKernel(k),
		Initramfs:     results.Initramfs{Path: ir.Path, SHA256: ir.SHA256},
		AgentVersion:  ir.AgentVersion,
		Accel:         results.Accel(v.Accel),
		AccelReason:   v.Reason,
		TimeoutFactor: v.Accel.Factor(),
		Host:          hostInfo(),
	}
}

// ManifestKernel is the manifest's record of a kernel.
func ManifestKernel(k *results.Kernel) results.Kernel { return manifestKernel(k) }

// manifestKernel is the manifest's record of a kernel, with how it was
// built when it was: tree, base commit, patches, fragments, config hash.
func manifestKernel(k *results.Kernel) results.Kernel {
	rk := results.Kernel{
		Name: k.Name, ID: k.ID, Version: k.Version, Source: k.Source,
		Package: k.Package, PackageVersion: k.PackageVersion, Suite: k.Suite,
		Image: k.Image, Config: k.Config,
	}
	if b := k.Build; b != nil {
		rb := &results.KernelBuild{Tree: b.Tree, BaseCommit: b.BaseCommit, ConfigSHA256: b.ConfigSHA256}
		for _, p := range b.Patches {
			rb.Patches = append(rb.Patches, results.FileHash{Path: p.Path, SHA256: p.SHA256})
		}
		for _, f := range b.Fragments {
			rb.Fragments = append(rb.Fragments, results.FileHash{Path: f.Path, SHA256: f.SHA256})
		}
		rk.Build = rb
	}
	return rk
}
