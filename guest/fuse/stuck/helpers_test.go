package stuck

import (
	"klab/guest/fuse/abi"
	"klab/guest/fuse/match"
)

func sel(op abi.Opcode, name string) match.Selector { return match.Selector{Op: op, Name: name} }
