// Package images owns the things a guest boots from: kernels, which
// ResolveKernel finds by reference (Debian packages through package
// images/debian, local images and trees, and builds from source, which
// package images/build makes into the store of package images/buildstore),
// and initramfs images (u-root's init, the klab agent and the kernel
// modules the agent needs). It never starts a VM. A kernel is a
// results.Kernel: the cache's kernel.json and a run manifest's "kernel"
// are one type and one format.
package images
