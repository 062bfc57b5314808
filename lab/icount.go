package lab

import (
	"fmt"
	"regexp"

	"klab/vm"
)

// icountOptions is what klab passes on to QEMU's -icount: a plain list
// of options (shift=0,sleep=off), nothing QEMU would read as another
// argument.
var icountOptions = regexp.MustCompile(`^[a-z0-9]+(=[a-z0-9]+)?(,[a-z0-9]+(=[a-z0-9]+)?)*$`)

// CheckIcount checks QEMU -icount options as BootRequest.Icount takes
// them.
func CheckIcount(s string) error {
	if !icountOptions.MatchString(s) {
		return fmt.Errorf("%q: want QEMU's -icount options, e.g. shift=0,sleep=off", s)
	}
	return nil
}

// icountVerdict is the accelerator of an instruction-counted boot. QEMU
// counts guest instructions under single-threaded TCG only (it refuses
// -icount with KVM and with multi-threaded TCG), so auto means TCG here,
// without a KVM probe, and kvm is an error.
func icountVerdict(accel, icount string, multiThread bool) (vm.Verdict, error) {
	if err := CheckIcount(icount); err != nil {
		return vm.Verdict{}, fmt.Errorf("icount %w", err)
	}
	switch accel {
	case "", "auto", "tcg":
	case "kvm":
		return vm.Verdict{}, fmt.Errorf("icount %s needs TCG, QEMU counts instructions only there: use the accelerator tcg or auto, not kvm", icount)
	default:
		return vm.Verdict{}, fmt.Errorf("accelerator %q: want auto, kvm or tcg", accel)
	}
	if multiThread {
		return vm.Verdict{}, fmt.Errorf("icount %s needs single-threaded TCG: QEMU refuses it with multi-threaded TCG", icount)
	}
	return vm.Verdict{Accel: vm.TCG, Reason: "icount " + icount + " counts instructions under TCG only"}, nil
}
