package kerneldir

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"klab/images/internal/imagetest"
)

func TestCheckBzImage(t *testing.T) {
	dir := t.TempDir()
	good := imagetest.WriteFile(t, filepath.Join(dir, "bzImage"),
		imagetest.BzImage("7.3.4+deb13-cloud-amd64 (debian-kernel@lists.example) #1 SMP PREEMPT_DYNAMIC Debian 7.3.4-1~bpo13+1 (2026-11-15)"))
	v, err := CheckBzImage(good)
	if err != nil {
		t.Fatal(err)
	}
	if v != "7.3.4+deb13-cloud-amd64" {
		t.Errorf("version = %q, want 7.3.4+deb13-cloud-amd64", v)
	}

	noVersion := imagetest.WriteFile(t, filepath.Join(dir, "nover"), imagetest.BzImage(""))
	if v, err := CheckBzImage(noVersion); err != nil || v != "" {
		t.Errorf("image without version string: got %q, %v; want \"\", nil", v, err)
	}

	notKernel := imagetest.WriteFile(t, filepath.Join(dir, "foo"), []byte(strings.Repeat("#!/bin/sh\necho hello\n", 200)))
	_, err = CheckBzImage(notKernel)
	if err == nil || !strings.Contains(err.Error(), `not a bzImage (no "HdrS" boot signature at offset 0x202)`) ||
		!strings.Contains(err.Error(), "arch/x86/boot/bzImage") || !strings.HasPrefix(err.Error(), notKernel+":") {
		t.Errorf("non-kernel file: err = %v", err)
	}

	noFlag := imagetest.BzImage("6.1.0-50-cloud-amd64 #1")
	noFlag[0x1FE] = 0
	if _, err := CheckBzImage(imagetest.WriteFile(t, filepath.Join(dir, "noflag"), noFlag)); err == nil || !strings.Contains(err.Error(), "0x55AA") {
		t.Errorf("missing boot flag: err = %v", err)
	}

	zImage := imagetest.BzImage("2.6.0")
	zImage[0x211] = 0
	if _, err := CheckBzImage(imagetest.WriteFile(t, filepath.Join(dir, "zImage"), zImage)); err == nil || !strings.Contains(err.Error(), "zImage") {
		t.Errorf("zImage: err = %v", err)
	}

	i386 := imagetest.BzImage("7.3.0")
	binary.LittleEndian.PutUint16(i386[0x236:], 0)
	if _, err := CheckBzImage(imagetest.WriteFile(t, filepath.Join(dir, "i386"), i386)); err == nil || !strings.Contains(err.Error(), "32-bit") {
		t.Errorf("32-bit kernel: err = %v", err)
	}

	short := imagetest.WriteFile(t, filepath.Join(dir, "short"), []byte("tiny"))
	if _, err := CheckBzImage(short); err == nil || !strings.Contains(err.Error(), "not a bzImage") {
		t.Errorf("short file: err = %v", err)
	}

	if _, err := CheckBzImage(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: err = %v", err)
	}
	if _, err := CheckBzImage(filepath.Join(dir, "missing")); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: err = %v", err)
	}

	badPtr := imagetest.BzImage("")
	binary.LittleEndian.PutUint16(badPtr[0x20E:], 0xFFF0)
	if _, err := CheckBzImage(imagetest.WriteFile(t, filepath.Join(dir, "badptr"), badPtr)); err == nil {
		t.Error("kernel_version pointing past the file: no error")
	}
}
