package bundle

import (
	"fmt"
	"os"
	"path/filepath"
)

// PlaceTree moves the matrix results tree of a directory that Unpack made
// to dest, and assembles each kernel's files from the blobs into
// kernelsDir/<kernel id>/ with a kernel.json, as Place does for a run. A
// kernel directory that exists already is kept; dest must not exist,
// which is checked before anything is placed. Place puts a tree in a runs
// directory by passing runsDir/<ix.Tree.Name> as dest.
func PlaceTree(unpacked string, ix *Index, dest, kernelsDir string) (*Placed, error) {
	if !ix.IsMatrix() {
		return nil, fmt.Errorf("place: the bundle holds the run %s, not a matrix results tree", ix.RunID)
	}
	kernelsDir, err := filepath.Abs(kernelsDir)
	if err != nil {
		return nil, fmt.Errorf("place kernels: %w", err)
	}
	p := &Placed{TreeDir: dest}
	if _, err := os.Lstat(dest); err == nil {
		return nil, fmt.Errorf("place matrix tree %s: %s exists already", ix.Tree.Name, dest)
	}
	if err := placeArtefacts(unpacked, ix, kernelsDir, p); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return nil, fmt.Errorf("place matrix tree %s: %w", ix.Tree.Name, err)
	}
	if err := moveDir(filepath.Join(unpacked, "tree"), dest); err != nil {
		return nil, fmt.Errorf("place matrix tree %s: %w", ix.Tree.Name, err)
	}
	return p, nil
}
