package debian

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// SuiteStatus says whether one Debian suite is reachable.
type SuiteStatus struct {
	// Suite is the suite name, e.g. "trixie-backports".
	Suite string
	// Mirror is the archive URI used.
	Mirror string
	// Err is nil when the suite's index could be fetched.
	Err error
}

// Detail is a one-line description for `klab doctor`.
func (s SuiteStatus) Detail() string {
	if s.Err != nil {
		return s.Err.Error()
	}
	return fmt.Sprintf("reachable at %s", s.Mirror)
}

// CheckSuites checks each suite klab fetches kernels from.
func CheckSuites(ctx context.Context, o Options) []SuiteStatus {
	mirror, err := o.mirror()
	if err != nil {
		return []SuiteStatus{{Suite: "mirror", Err: err}}
	}
	var out []SuiteStatus
	for _, s := range Suites() {
		out = append(out, SuiteStatus{Suite: s, Mirror: mirror, Err: checkSuite(ctx, mirror, s)})
	}
	return out
}

// checkSuite fetches the head of the suite's InRelease file.
func checkSuite(ctx context.Context, mirror, suite string) error {
	u := strings.TrimRight(mirror, "/") + "/dists/" + suite + "/InRelease"
	if strings.HasPrefix(u, "file:") {
		if _, err := os.Stat(strings.TrimPrefix(strings.TrimPrefix(u, "file:"), "//")); err != nil {
			return fmt.Errorf("%s: %w", u, err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s unreachable: %w", u, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return nil
}
