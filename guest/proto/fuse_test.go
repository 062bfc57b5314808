package proto

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestFUSEStepJSON(t *testing.T) {
	ms := int64(0)
	s := Step{ID: 3, Kind: StepFUSE, FUSE: &FUSEStep{
		Server: FUSEStuck, Transport: FUSETransportDev, NoSplice: true, Mountpoint: "/mnt", Backing: "/b",
		MountOptions: []string{"allow_other"}, Threads: 4, RequestTimeoutSec: 20, MaxWrite: 65536,
		Passthrough: FUSEPassthroughOptions{AttrTimeoutMs: &ms, Writeback: true, Xattr: true},
		Stuck:       []string{"lookup:stuck=never"},
		Interrupt:   &FUSEInterruptOptions{Policy: "eagain:2", Hold: []string{"lookup:held*=2s"}},
		Then:        &Step{Kind: StepExec, Argv: []string{"true"}},
	}}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"server":"stuck"`, `"no_splice":true`, `"mountpoint":"/mnt"`, `"backing":"/b"`, `"mount_options"`, `"request_timeout_s":20`, `"attr_timeout_ms":0`, `"writeback":true`, `"stuck":["lookup:stuck=never"]`, `"policy":"eagain:2"`, `"then":{`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("%s lacks %s", b, key)
		}
	}
	var back Step
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("round trip: %+v, %v", back.FUSE, err)
	}
}

// TestFUSEStepNoSpliceOptional: no_splice is left out when false, and a
// step without it (from a host that predates it) decodes as splicing.
func TestFUSEStepNoSpliceOptional(t *testing.T) {
	b, err := json.Marshal(FUSEStep{Mountpoint: "/m", Backing: "/b"})
	if err != nil || strings.Contains(string(b), "no_splice") {
		t.Errorf("%s (%v): want no no_splice", b, err)
	}
	var s FUSEStep
	if err := json.Unmarshal([]byte(`{"server":"passthrough","mountpoint":"/m","backing":"/b"}`), &s); err != nil || s.NoSplice {
		t.Errorf("a step without no_splice: %+v, %v", s, err)
	}
}
