// Package match selects FUSE requests by opcode and by name, for the
// rule-based servers (stuck, interrupt). A request's name is the name it
// carries (LOOKUP, CREATE, MKDIR, MKNOD, SYMLINK, UNLINK, RMDIR, RENAME's
// old name, LINK), or for requests that carry only a node ID, the name
// under which that node was last looked up.
package match

import (
	"fmt"
	"path"
	"strings"

	"klab/guest/fuse/abi"
	"klab/guest/fuse/dispatch"
)

// Selector picks requests. The zero Selector matches every request.
type Selector struct {
	// Op is the opcode; 0 matches any.
	Op abi.Opcode
	// Name is a path.Match pattern for the request's name ("stuck",
	// "held*"); empty matches any name.
	Name string
}

// String returns s in ParseSelector's syntax.
func (s Selector) String() string {
	op := "*"
	if s.Op != 0 {
		op = strings.ToLower(s.Op.String())
	}
	if s.Name == "" {
		return op
	}
	return op + ":" + s.Name
}

// ParseSelector parses "OP[:NAME]", where OP is an opcode name (lookup,
// getattr, read, ...) or "*" for any, and NAME is a path.Match pattern.
func ParseSelector(s string) (Selector, error) {
	opS, name, _ := strings.Cut(s, ":")
	var sel Selector
	if opS != "*" && opS != "any" {
		op, err := abi.ParseOpcode(opS)
		if err != nil {
			return sel, err
		}
		sel.Op = op
	}
	if name != "" {
		if _, err := path.Match(name, ""); err != nil {
			return sel, fmt.Errorf("name pattern %q: %w", name, err)
		}
		sel.Name = name
	}
	return sel, nil
}

// Namer names the node a request refers to (fs.Handler implements it).
type Namer interface {
	// NodeName returns the last path component node was looked up under,
	// or "".
	NodeName(node uint64) string
}

// Name returns the name r carries or refers to; namer may be nil.
func Name(r *dispatch.Request, namer Namer) string {
	a := r.Arg
	skip := -1
	switch r.Header.Opcode {
	case abi.OpLookup, abi.OpUnlink, abi.OpRmdir, abi.OpSymlink:
		skip = 0
	case abi.OpCreate, abi.OpMknod, abi.OpRename2:
		skip = 16
	case abi.OpMkdir, abi.OpRename, abi.OpLink:
		skip = 8
	}
	if skip >= 0 && len(a) >= skip {
		n, _ := abi.CString(a[skip:])
		return string(n)
	}
	if namer != nil {
		return namer.NodeName(r.Header.NodeID)
	}
	return ""
}

// Match reports whether r matches s; namer may be nil.
func (s Selector) Match(r *dispatch.Request, namer Namer) bool {
	if s.Op != 0 && r.Header.Opcode != s.Op {
		return false
	}
	if s.Name == "" {
		return true
	}
	ok, _ := path.Match(s.Name, Name(r, namer))
	return ok
}
