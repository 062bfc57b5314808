package proto

// WorkloadStep runs one pattern of klab's Go I/O engine.
type WorkloadStep struct{}

// FioStep runs fio in the guest.
type FioStep struct{}

// Sample is one periodic sample of a running workload.
type Sample struct {
	// Step is the step the sample belongs to.
	Step int `json:"step"`
}

// Metrics are the final numbers of a workload or fio step.
type Metrics struct{}
