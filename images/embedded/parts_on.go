//go:build klab_embed

package embedded

import (
	_ "embed"
	"encoding/json"
)

//go:embed klab-agent
var agent []byte

//go:embed base.cpio
var base []byte

//go:embed parts.json
var desc []byte

func init() {
	var p Parts
	if err := json.Unmarshal(desc, &p); err != nil || p.AgentKey == "" || p.BaseKey == "" || len(agent) == 0 || len(base) == 0 {
		// A broken embedding is treated as none: klab then builds the
		// parts from source and says so if it cannot.
		return
	}
	p.Agent, p.Base = agent, base
	parts = &p
}
