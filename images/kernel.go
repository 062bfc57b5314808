// Package images owns the things a guest boots from: kernels (Debian
// packages, local images, and builds from source, which package
// images/build makes and this package finds) and initramfs images
// (u-root's init, the klab agent and the kernel modules the agent needs).
// It never starts a VM.
package images

// Kernel is a bootable kernel with everything klab knows about it.
type Kernel struct {
	// Name is the human name the user gave, e.g. "debian:7.3" or a path.
	Name string `json:"name"`
	// ID is a content hash of the image and its config ("k-" + 16 hex).
	ID string `json:"id"`
	// Version is the kernel release (uname -r), when known.
	Version string `json:"version,omitempty"`
	// Source says where the kernel came from: "debian", "local" or "build".
	Source string `json:"source"`
	// Package is the Debian package and version, for Source "debian".
	Package string `json:"package,omitempty"`
	// PackageVersion is the Debian package version, for Source "debian".
	PackageVersion string `json:"package_version,omitempty"`
	// Suite is the Debian suite the package came from.
	Suite string `json:"suite,omitempty"`
	// Image is the path of the bzImage.
	Image string `json:"image"`
	// ImageSize is the image's size when it was cached; a cache hit
	// whose image has another size is damaged, and ignored.
	ImageSize int64 `json:"image_size,omitempty"`
	// Config is the path of the kernel's .config, empty when unknown.
	Config string `json:"config,omitempty"`
	// Modules is the directory holding modules.* and kernel/**.ko*, empty
	// when the kernel has no modules shipped with it.
	Modules string `json:"modules,omitempty"`
	// Build says how the kernel was built, for Source "build".
	Build *KernelBuild `json:"build,omitempty"`
}
