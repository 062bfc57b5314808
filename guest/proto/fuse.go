package proto

// FUSEStep mounts a klab FUSE server in the guest, runs Then against the
// mount, and always tears the mount down.
type FUSEStep struct {
	// Then is the step run while the server is mounted.
	Then *Step `json:"then,omitempty"`
}
