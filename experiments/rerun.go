package experiments

import (
	"fmt"
	"os"
	"strings"
)

// RerunOptions repeat a saved run from its manifest alone.
func RerunOptions(s *Saved, base RunOptions) (*File, RunOptions, error) {
	m := s.Manifest
	f := s.File
	o := base
	o.Sets = m.Sets
	o.Compare, o.Rounds, o.Order = m.Axis, m.Rounds, m.Order
	seed := m.Seed
	o.Seed = &seed
	o.CPUs, o.MemMB, o.Accel = m.CPUs, m.MemMB, m.AccelWanted
	// The mode the run ran in, when it was not the spec's own.
	if vm := f.Spec.VM; m.Icount != vm.Icount || m.TCGMultithread != vm.TCGMultithread {
		o.Icount, o.TCGMultithread = m.Icount, m.TCGMultithread
	}
	o.Kernels = nil
	for _, k := range m.Kernels {
		o.Kernels = append(o.Kernels, ExactRef(k))
	}
	// The file as it was, under its recorded name.
	f.Path = m.SpecFile
	return f, o, nil
}

// ExactRef is a reference to exactly the kernel a run used: a Debian
// package pinned to its version, a kernel built from source by its id
// (build:<kernel ID>: the name may have been given to another build since,
// and the image alone would lose its config and modules), or the image
// file itself, never a moving alias such as debian:7.3.
func ExactRef(k ManifestKernel) string {
	rk := k.Kernel
	switch {
	case rk.Source == "debian" && rk.Version != "" && rk.PackageVersion != "":
		return "debian:" + rk.Version + "=" + rk.PackageVersion
	case rk.Source == "build" && strings.HasPrefix(rk.ID, "k-"):
		return "build:" + rk.ID
	case rk.Image != "":
		if _, err := os.Stat(rk.Image); err == nil {
			return rk.Image
		}
	}
	return k.Ref
}

// Differences says what differs between a run and its rerun: kernels,
// QEMU, accelerator, host.
func Differences(a, b *Manifest) []string {
	var d []string
	for i := range a.Kernels {
		if i >= len(b.Kernels) {
			break
		}
		ka, kb := a.Kernels[i].Kernel, b.Kernels[i].Kernel
		if ka.ID != kb.ID {
			d = append(d, fmt.Sprintf("kernel %d: %s (%s) then %s (%s)", i+1, ka.ID, ka.Version, kb.ID, kb.Version))
		}
	}
	if a.QEMU.Version != b.QEMU.Version {
		d = append(d, fmt.Sprintf("QEMU: %q then %q", a.QEMU.Version, b.QEMU.Version))
	}
	if a.Accel != b.Accel {
		d = append(d, fmt.Sprintf("accelerator: %s then %s", a.Accel, b.Accel))
	}
	if a.Host.KernelRelease != b.Host.KernelRelease {
		d = append(d, fmt.Sprintf("host kernel: %s then %s", a.Host.KernelRelease, b.Host.KernelRelease))
	}
	if a.Host.CPUModel != b.Host.CPUModel {
		d = append(d, fmt.Sprintf("host CPU: %s then %s", a.Host.CPUModel, b.Host.CPUModel))
	}
	if sa, sb := a.Suite, b.Suite; sa != nil && sb != nil {
		if ua, ub := sa.Userspace, sb.Userspace; ua != nil && ub != nil && ua.ID != ub.ID {
			d = append(d, fmt.Sprintf("userspace: %s then %s", ua.ID, ub.ID))
		}
		if fa, fb := sa.Fstests, sb.Fstests; fa != nil && fb != nil && fa.Key != fb.Key {
			d = append(d, fmt.Sprintf("fstests: %s (%s) then %s (%s)", fa.Key, fa.Source.ID, fb.Key, fb.Source.ID))
		}
	}
	if strings.Join(initramfsHashes(a), ",") != strings.Join(initramfsHashes(b), ",") {
		d = append(d, "initramfs: different images (agent "+a.AgentVersion+" then "+b.AgentVersion+")")
	}
	return d
}

func initramfsHashes(m *Manifest) []string {
	var h []string
	for _, i := range m.Initramfs {
		h = append(h, i.SHA256)
	}
	return h
}
