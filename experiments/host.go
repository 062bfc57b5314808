package experiments

import (
	"errors"
	"fmt"
)

// hostProblems says what of spec s cannot run on the host itself (the
// kernel host: no VM, see lab/hostguest): anything that would change the
// host beyond a private root (ramdisks, file systems on devices, module
// parameters, sysctls) and the VM's own settings. They are refused before
// anything runs; a spec meant for a guest runs on a host only when it
// keeps to directories, FUSE mounts and workloads.
func hostProblems(f *File) error {
	s := f.Spec
	var errs []error
	bad := func(field, why string) {
		errs = append(errs, fmt.Errorf("%s: %s (%s)", field, why, f.Path))
	}
	st := &s.Setup
	if st.Brd != nil {
		bad("setup.brd", "a host run loads no kernel modules; run it in a guest")
	}
	if len(st.Mkfs) > 0 {
		bad("setup.mkfs", "a host run makes no file systems on devices; run it in a guest")
	}
	for _, m := range st.Mounts {
		if m.Device != "tmpfs" && m.Type != "tmpfs" {
			bad("setup.mounts", fmt.Sprintf("%s: a host run mounts tmpfs only (in its private root)", m.Path))
		}
	}
	if len(st.Modules) > 0 {
		bad("setup.modules", "a host run changes no module parameters")
	}
	if len(st.Sysctls) > 0 {
		bad("setup.sysctls", "a host run changes no sysctls of the host")
	}
	if len(s.Sysctls) > 0 {
		bad("sysctls", "a host run changes no sysctls of the host")
	}
	vm := &s.VM
	for _, v := range []struct{ field, val string }{{"vm.accel", vm.Accel}, {"vm.icount", vm.Icount}, {"vm.cmdline", vm.Cmdline}} {
		if v.val != "" {
			bad(v.field, "a host run has no VM")
		}
	}
	if vm.TCGMultithread {
		bad("vm.tcg_multithread", "a host run has no VM")
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s cannot run on the host: %w", s.Name, errors.Join(errs...))
}
