package images

import (
	"path/filepath"
	"strings"
	"testing"

	"klab/images/internal/imagetest"
)

// TestTreeKernel: a kernel tree built in place boots with its own image,
// .config and built modules; a tree that was not built, or cannot reach
// the agent, is refused with the make target or option to fix it.
func TestTreeKernel(t *testing.T) {
	tree := t.TempDir()
	imagetest.WriteFile(t, filepath.Join(tree, "Kconfig"), []byte("mainmenu \"Linux\"\n"))
	if _, err := TreeKernel(tree); err == nil || !strings.Contains(err.Error(), "not configured or built") || !strings.Contains(err.Error(), "--build") {
		t.Errorf("unconfigured tree: %v", err)
	}
	imagetest.WriteFile(t, filepath.Join(tree, ".config"), []byte("CONFIG_VIRTIO_PCI=y\nCONFIG_VIRTIO_CONSOLE=m\n"))
	if _, err := TreeKernel(tree); err == nil || !strings.Contains(err.Error(), "make -j$(nproc) bzImage modules") {
		t.Errorf("unbuilt tree: %v", err)
	}
	imagetest.WriteFile(t, filepath.Join(tree, TreeImage), imagetest.BzImage("7.3.0-rc1+ (me@host) #1 SMP"))
	if _, err := TreeKernel(tree); err == nil || !strings.Contains(err.Error(), "CONFIG_VIRTIO_CONSOLE=m") || !strings.Contains(err.Error(), "make modules") {
		t.Errorf("modular virtio without modules: %v", err)
	}
	// Modules built: modules.order names them (".o" since 6.x).
	imagetest.WriteFile(t, filepath.Join(tree, "modules.order"), []byte("drivers/char/virtio_console.o\nfs/fuse/fuse.o\n"))
	imagetest.WriteFile(t, filepath.Join(tree, "modules.builtin"), []byte("kernel/drivers/virtio/virtio_pci.ko\n"))
	imagetest.WriteFile(t, filepath.Join(tree, "drivers/char/virtio_console.ko"), imagetest.Module("name=virtio_console", "depends="))
	k, err := TreeKernel(tree)
	if err != nil {
		t.Fatal(err)
	}
	if k.Source != "tree" || k.Image != filepath.Join(tree, TreeImage) || k.Config != filepath.Join(tree, ".config") || k.Modules != tree || !strings.HasPrefix(k.Version, "7.3.0-rc1+") || k.Name != "tree:"+tree {
		t.Errorf("tree kernel %+v", k)
	}
	// fuse.ko is listed but was not built, brd is absent: both optional
	// for a tree; virtio_console comes from the tree, virtio_pci is built in.
	o := InitramfsOptions{Kernel: k, Modules: AgentModules}
	mods, err := o.modules()
	if err != nil {
		t.Fatal(err)
	}
	if len(mods) != 1 || mods[0].Name != "virtio_console" || mods[0].Path != filepath.Join(tree, "drivers/char/virtio_console.ko") {
		t.Errorf("modules %+v, want virtio_console from the tree", mods)
	}
	o.ExtraModules = []string{"nbd"}
	if _, err := o.modules(); err == nil || !strings.Contains(err.Error(), `"nbd"`) {
		t.Errorf("--module nbd missing from the tree: %v", err)
	}

	// tree:DIR and a plain directory resolve alike.
	for _, ref := range []string{"tree:" + tree, tree} {
		k2, err := ResolveKernel(t.Context(), ref, ResolveOptions{})
		if err != nil || k2.ID != k.ID {
			t.Errorf("ResolveKernel(%s) = %+v, %v", ref, k2, err)
		}
	}
	other := t.TempDir()
	if _, err := TreeKernel(other); err == nil || !strings.Contains(err.Error(), "not a kernel tree") {
		t.Errorf("empty directory: %v", err)
	}
	noVirtio := t.TempDir()
	imagetest.WriteFile(t, filepath.Join(noVirtio, TreeImage), imagetest.BzImage("7.3.0 (me@host) #1"))
	imagetest.WriteFile(t, filepath.Join(noVirtio, ".config"), []byte("CONFIG_VIRTIO_PCI=y\n"))
	if _, err := TreeKernel(noVirtio); err == nil || !strings.Contains(err.Error(), "lacks CONFIG_VIRTIO_CONSOLE") {
		t.Errorf("tree without virtio console: %v", err)
	}
}
