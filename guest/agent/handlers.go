package agent

import "klab/guest/proto"

// DefaultHandlers returns the step handlers the guest agent registers
// beyond exec and sysctl. Each step kind's package adds one line here.
func DefaultHandlers() map[proto.StepKind]Handler {
	return map[proto.StepKind]Handler{
		proto.StepWorkload:  RunWorkloadStep,
		proto.StepFio:       RunFioStep,
		proto.StepFUSE:      runFUSE,
		proto.StepShare:     runShare,
		proto.StepUserspace: runUserspace,
		proto.StepFstests:   runFstests,
	}
}
