// Package embedded holds the guest parts that a release build of klab
// carries inside its own binary: the static klab-agent and the u-root
// base initramfs. With them an installed klab assembles initramfs images
// anywhere, without its source tree or a Go toolchain.
//
// `make build` writes the parts into this directory (see PartsFile) and
// builds klab with the klab_embed tag; a plain `go build` has no parts and
// klab then builds them from its source tree, as in a checkout.
package embedded

// PartsFile is the name of the description written next to the parts.
const PartsFile = "parts.json"

// Parts are the guest parts built into the binary.
type Parts struct {
	// AgentKey is the hash of the agent's sources (images' agent key);
	// the agent's version is derived from it.
	AgentKey string `json:"agent_key"`
	// BaseKey is the hash of the u-root base's inputs.
	BaseKey string `json:"base_key"`
	// GoVersion is the toolchain the parts were built with.
	GoVersion string `json:"go_version"`
	// Agent is the static agent binary.
	Agent []byte `json:"-"`
	// Base is the u-root base cpio.
	Base []byte `json:"-"`
}

// parts is set by the klab_embed build.
var parts *Parts

// Get returns the embedded parts, or nil when this binary has none.
func Get() *Parts { return parts }
