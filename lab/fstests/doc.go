// Package fstests runs fstests in klab guests: one guest at a time per
// shard, a fresh guest after a test that hung or crashed the kernel, and
// shards side by side. What a guest does is the agent's fstests step
// (guest/proto/fstests.go); what the results mean is results/suite's.
package fstests
