// Package images owns the things a guest boots from: kernels (Debian
// packages, local images, and builds from source, which package
// images/build makes and this package finds) and initramfs images
// (u-root's init, the klab agent and the kernel modules the agent needs).
// It never starts a VM.
package images

import "klab/results"

// Kernel is a bootable kernel with everything klab knows about it. It is
// results.Kernel: the cache's kernel.json and a run manifest's "kernel"
// are one type and one format.
type Kernel = results.Kernel
