package kerneldir

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
)

// Offsets in the x86 boot protocol's setup header
// (Documentation/arch/x86/boot.rst).
const (
	bootFlagOff      = 0x1FE // u16 0xAA55, the legacy boot sector signature
	headerMagicOff   = 0x202 // "HdrS"
	protocolOff      = 0x206 // u16 boot protocol version
	kernelVersionOff = 0x20E // u16 pointer to the version string, minus 0x200
	loadFlagsOff     = 0x211 // u8, bit 0 LOADED_HIGH: a bzImage
	xloadFlagsOff    = 0x236 // u16, bit 0 XLF_KERNEL_64 (protocol >= 2.12)

	// setupReadMax bounds how much of the image is read: the setup code
	// is at most 127 sectors of 512 bytes after the boot sector.
	setupReadMax = 128 * 512
)

const bzImageHint = "klab boots x86_64 bzImage files such as arch/x86/boot/bzImage"

// CheckBzImage checks that path is an x86 bzImage kernel and returns its
// kernel release (the first word of the version string embedded in the
// setup header, e.g. "7.3.4+deb13-cloud-amd64"). The release is empty when
// the image carries no version string. A file that is not a bzImage gives
// an error that says so and why.
func CheckBzImage(path string) (version string, err error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("kernel image: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s: not a bzImage (not a regular file); %s", path, bzImageHint)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("kernel image: %w", err)
	}
	defer f.Close()
	buf := make([]byte, setupReadMax)
	n, err := f.ReadAt(buf, 0)
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("kernel image %s: %w", path, err)
	}
	return parseBzImageHeader(path, buf[:n])
}

// parseBzImageHeader checks the setup header at the start of a kernel
// image (b holds its first bytes) and returns the release.
func parseBzImageHeader(path string, b []byte) (string, error) {
	notBz := func(why string) error {
		return fmt.Errorf("%s: not a bzImage (%s); %s", path, why, bzImageHint)
	}
	if len(b) < xloadFlagsOff+2 {
		return "", notBz(fmt.Sprintf("only %d bytes long", len(b)))
	}
	if string(b[headerMagicOff:headerMagicOff+4]) != "HdrS" {
		return "", notBz(`no "HdrS" boot signature at offset 0x202`)
	}
	if b[bootFlagOff] != 0x55 || b[bootFlagOff+1] != 0xAA {
		return "", notBz("no 0x55AA boot flag at offset 0x1FE")
	}
	proto := binary.LittleEndian.Uint16(b[protocolOff:])
	if proto >= 0x200 && b[loadFlagsOff]&1 == 0 {
		return "", notBz("a zImage loaded low, LOADED_HIGH is clear")
	}
	if proto >= 0x20C && binary.LittleEndian.Uint16(b[xloadFlagsOff:])&1 == 0 {
		return "", notBz("a 32-bit kernel, XLF_KERNEL_64 is clear")
	}
	ptr := int(binary.LittleEndian.Uint16(b[kernelVersionOff:]))
	if ptr == 0 {
		return "", nil
	}
	off := ptr + 0x200
	if off >= len(b) {
		return "", fmt.Errorf("%s: kernel_version points at 0x%x, past the setup code", path, off)
	}
	s := b[off:]
	if i := bytes.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	fields := strings.Fields(string(s))
	if len(fields) == 0 {
		return "", nil
	}
	return fields[0], nil
}
