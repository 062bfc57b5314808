package debian

import (
	"sort"
	"strings"
	"testing"
)

func TestParseAptOutput(t *testing.T) {
	madison := []byte(`linux-image-7.3.4+deb13-cloud-amd64 | 7.3.4-1~bpo13+1 | http://mirror.example/debian trixie-backports/main amd64 Packages
linux-image-7.2.13+deb14-cloud-amd64 |   7.2.13-1 | http://mirror.example/debian sid/main amd64 Packages
     linux | 7.3.4-1 | http://mirror.example/debian sid/main Sources
`)
	ls := parseMadison(madison)
	if len(ls) != 2 || ls[0] != (madisonLine{"linux-image-7.3.4+deb13-cloud-amd64", "7.3.4-1~bpo13+1", "trixie-backports"}) || ls[1].suite != "sid" {
		t.Errorf("parseMadison = %+v", ls)
	}
	show := []byte(`Package: linux-image-7.3.4+deb13-cloud-amd64
Version: 7.3.4-1~bpo13+1
Installed-Size: 15
Pre-Depends: linux-base (>= 4.17~)
Depends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1), linux-binary-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1),
 linux-modules-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1)
Description: Linux 7.3.4 for x86-64 cloud
 A long description
 Depends: not-a-field
Size: 1928

Package: linux-binary-7.3.4+deb13-cloud-amd64
Version: 7.3.4-1~bpo13+1
Depends: linux-base-7.3.4+deb13-cloud-amd64 (= 7.3.4-1~bpo13+1)
Size: 13604064
`)
	ps := parseShow(show)
	if len(ps) != 2 || ps[0].Size != 1928 || ps[1].Size != 13604064 {
		t.Fatalf("parseShow = %+v", ps)
	}
	var deps []string
	for _, d := range releaseDeps(ps[0], "7.3.4+deb13-cloud-amd64") {
		deps = append(deps, d.Name+"="+d.Version)
	}
	sort.Strings(deps)
	want := "linux-base-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1 linux-binary-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1 linux-modules-7.3.4+deb13-cloud-amd64=7.3.4-1~bpo13+1"
	if strings.Join(deps, " ") != want {
		t.Errorf("releaseDeps = %v", deps)
	}
	old := debPkg{Name: "linux-image-6.1.0-50-cloud-amd64", Version: "6.1.176-1", depends: "kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool"}
	if d := releaseDeps(old, "6.1.0-50-cloud-amd64"); len(d) != 0 {
		t.Errorf("6.1 releaseDeps = %v, want none", d)
	}
}

func TestParseMadisonSources(t *testing.T) {
	ls := parseMadisonSources([]byte(`     fuse3 |   3.18.3-1 | file:/srv/debian sid/main Sources
     fuse3 |   3.14.0-4 | file:/srv/debian bookworm/main amd64 Packages
  liburing |     2.15-1 | file:/srv/debian sid/main Sources
`))
	if len(ls) != 2 || ls[0] != (madisonLine{"fuse3", "3.18.3-1", "sid"}) || ls[1].name != "liburing" {
		t.Fatalf("parseMadisonSources = %+v", ls)
	}
	lines := []madisonLine{{"fuse3", "3.18.2-1", "sid"}, {"fuse3", "3.18.3-1", "sid"}, {"fuse3", "3.19.0-1", "experimental"}}
	if l, err := pickSourcePackage(lines, "fuse3", "", []string{"sid"}); err != nil || l.version != "3.18.3-1" {
		t.Errorf("newest = %+v, %v", l, err)
	}
	if l, err := pickSourcePackage(lines, "fuse3", "3.18.2-1", []string{"sid"}); err != nil || l.version != "3.18.2-1" {
		t.Errorf("pinned = %+v, %v", l, err)
	}
	if _, err := pickSourcePackage(lines, "fuse3", "3.1-1", []string{"sid"}); err == nil || !strings.Contains(err.Error(), "there are: 3.18.2-1 3.18.3-1") {
		t.Errorf("missing pin: %v", err)
	}
	if _, err := pickSourcePackage(lines, "fuse", "", []string{"sid"}); err == nil {
		t.Error("a missing package was found")
	}
}
