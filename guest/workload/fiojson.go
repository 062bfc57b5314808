package workload

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"klab/guest/proto"
)

// FioOutput is the part of fio's --output-format=json(+) document that
// klab reads.
type FioOutput struct {
	// Version is "fio-3.33".
	Version string `json:"fio version"`
	// TimestampMs is when fio wrote the document.
	TimestampMs int64 `json:"timestamp_ms"`
	// GlobalOptions are the job file's [global] options, as strings.
	GlobalOptions map[string]string `json:"global options"`
	// Jobs are the jobs, or one entry per reporting group with
	// group_reporting.
	Jobs []FioJob `json:"jobs"`
}

// FioJob is one job (or reporting group) of FioOutput.
type FioJob struct {
	// Name is the job's name.
	Name string `json:"jobname"`
	// Error is the job's errno, 0 when it worked.
	Error int `json:"error"`
	// Elapsed is the job's wall time so far, in seconds.
	Elapsed int64 `json:"elapsed"`
	// Options are the job's own options, as strings.
	Options map[string]string `json:"job options"`
	// Read is the statistics of reads.
	Read FioDir `json:"read"`
	// Write is the statistics of writes.
	Write FioDir `json:"write"`
	// Trim is the statistics of trims.
	Trim FioDir `json:"trim"`
	// JobRuntime is the summed runtime of the job's threads, in ms.
	JobRuntime int64 `json:"job_runtime"`
	// UsrCPU is user CPU time as a percentage of JobRuntime.
	UsrCPU float64 `json:"usr_cpu"`
	// SysCPU is system CPU time as a percentage of JobRuntime.
	SysCPU float64 `json:"sys_cpu"`
}

// FioDir is one direction's statistics.
type FioDir struct {
	// IOBytes is the bytes moved.
	IOBytes int64 `json:"io_bytes"`
	// TotalIOs is the number of I/Os completed.
	TotalIOs int64 `json:"total_ios"`
	// Runtime is the direction's runtime in ms (the group's longest).
	Runtime int64 `json:"runtime"`
	// IOPS is fio's own rate.
	IOPS float64 `json:"iops"`
	// Clat is the completion latency, which for fio's synchronous engines
	// is the whole system call.
	Clat FioLat `json:"clat_ns"`
}

// FioLat is a latency distribution in nanoseconds.
type FioLat struct {
	// Min is the smallest latency.
	Min int64 `json:"min"`
	// Max is the largest latency.
	Max int64 `json:"max"`
	// Mean is the mean latency.
	Mean float64 `json:"mean"`
	// N is the number of latencies.
	N int64 `json:"N"`
	// Percentile maps "99.000000" to a value.
	Percentile map[string]int64 `json:"percentile"`
	// Bins is the full histogram (json+ only): bucket value to count.
	Bins map[string]uint64 `json:"bins"`
}

// ParseFioOutput decodes one fio JSON document.
func ParseFioOutput(b []byte) (*FioOutput, error) {
	var o FioOutput
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, fmt.Errorf("fio json: %w", err)
	}
	if o.Version == "" && len(o.Jobs) == 0 {
		return nil, fmt.Errorf("fio json: no \"fio version\" and no jobs: not fio output")
	}
	return &o, nil
}

// option returns a job option, falling back to the global ones.
func (o *FioOutput) option(j *FioJob, name string) string {
	if v, ok := j.Options[name]; ok {
		return v
	}
	return o.GlobalOptions[name]
}

// dirs returns the job's three directions.
func (j *FioJob) dirs() []*FioDir { return []*FioDir{&j.Read, &j.Write, &j.Trim} }

// totals returns the I/Os, bytes and summed latency of every job and
// direction.
func (o *FioOutput) totals() (ops, byt int64, latNs float64) {
	for i := range o.Jobs {
		for _, d := range o.Jobs[i].dirs() {
			ops += d.TotalIOs
			byt += d.IOBytes
			latNs += d.Clat.Mean * float64(d.Clat.N)
		}
	}
	return ops, byt, latNs
}

// rampNs is the first job's ramp_time, 0 when it has none.
func (o *FioOutput) rampNs() int64 {
	if len(o.Jobs) == 0 {
		return 0
	}
	d, err := ParseFioTime(o.option(&o.Jobs[0], "ramp_time"))
	if err != nil {
		return 0
	}
	return int64(d)
}

// Metrics maps the document into proto.Metrics with the Go engine's rules
// and units: operations are fio's I/Os of every direction (file operation
// engines such as filecreate count no bytes), the runtime is
// the longest direction's, latency percentiles come from the merged json+
// histograms (or, without them, from the busiest direction's percentiles),
// and CPU time is usr_cpu and sys_cpu applied to job_runtime.
func (o *FioOutput) Metrics(name string) *proto.Metrics {
	m := &proto.Metrics{Engine: proto.EngineFio, EngineVersion: o.Version, Name: name, RampNs: o.rampNs()}
	if len(o.Jobs) > 0 {
		j := &o.Jobs[0]
		if m.Name == "" {
			m.Name = j.Name
		}
		m.Pattern = o.option(j, "rw")
		if e := o.option(j, "ioengine"); e != "" {
			m.Pattern += "/" + e
		}
		m.Jobs = len(o.Jobs)
		if len(o.Jobs) == 1 {
			if n, err := strconv.Atoi(o.option(j, "numjobs")); err == nil && n > 1 {
				m.Jobs = n
			}
		}
	}
	var h Histogram
	var busiest *FioDir
	var runtimeMs int64
	var latSum float64
	binned := true
	for i := range o.Jobs {
		j := &o.Jobs[i]
		if j.Error != 0 {
			m.Errors++
		}
		m.CPU.UserNs += int64(math.Round(j.UsrCPU / 100 * float64(j.JobRuntime) * 1e6))
		m.CPU.SysNs += int64(math.Round(j.SysCPU / 100 * float64(j.JobRuntime) * 1e6))
		for _, d := range j.dirs() {
			if d.TotalIOs == 0 && d.Clat.N == 0 {
				continue
			}
			m.Ops += d.TotalIOs
			m.Bytes += d.IOBytes
			runtimeMs = max(runtimeMs, d.Runtime)
			latSum += d.Clat.Mean * float64(d.Clat.N)
			if busiest == nil || d.Clat.N > busiest.Clat.N {
				busiest = d
			}
			if len(d.Clat.Bins) == 0 && d.Clat.N > 0 {
				binned = false
			}
			for k, c := range d.Clat.Bins {
				v, err := strconv.ParseInt(k, 10, 64)
				if err == nil {
					h.RecordN(v, c)
				}
			}
		}
	}
	if len(o.Jobs) > 0 {
		switch o.option(&o.Jobs[0], "ioengine") {
		case "filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete":
			// File operation engines do fake I/Os of bs each; the Go
			// engine's creates move no data.
			m.Bytes = 0
		}
	}
	m.RuntimeNs = runtimeMs * int64(time.Millisecond)
	deriveRates(m)
	if busiest == nil {
		return m
	}
	if binned && h.Count() > 0 {
		m.Latency = h.Latency()
	} else {
		c := busiest.Clat
		m.Latency = proto.Latency{
			P50Ns:  c.Percentile["50.000000"],
			P90Ns:  c.Percentile["90.000000"],
			P99Ns:  c.Percentile["99.000000"],
			P999Ns: c.Percentile["99.900000"],
		}
	}
	// Exact figures from fio's own counters, across jobs and directions.
	m.Latency.Count, m.Latency.MinNs, m.Latency.MaxNs = 0, 0, 0
	first := true
	for i := range o.Jobs {
		for _, d := range o.Jobs[i].dirs() {
			if d.Clat.N == 0 {
				continue
			}
			m.Latency.Count += d.Clat.N
			if first || d.Clat.Min < m.Latency.MinNs {
				m.Latency.MinNs = d.Clat.Min
			}
			m.Latency.MaxNs = max(m.Latency.MaxNs, d.Clat.Max)
			first = false
		}
	}
	if m.Latency.Count > 0 {
		m.Latency.MeanNs = int64(math.Round(latSum / float64(m.Latency.Count)))
	}
	return m
}

// ParseFioTime parses a fio time option ("30", "30s", "500ms", "2m",
// "100us", "1h"); a bare number is seconds, as fio reads ramp_time and
// runtime. Empty is 0.
func ParseFioTime(s string) (time.Duration, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" {
		return 0, nil
	}
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("fio time %q: %w", s, err)
	}
	unit := map[string]time.Duration{
		"": time.Second, "s": time.Second, "sec": time.Second, "ms": time.Millisecond, "msec": time.Millisecond,
		"us": time.Microsecond, "usec": time.Microsecond, "m": time.Minute, "min": time.Minute, "h": time.Hour, "d": 24 * time.Hour,
	}[s[i:]]
	if unit == 0 {
		return 0, fmt.Errorf("fio time %q: unknown unit %q", s, s[i:])
	}
	return time.Duration(v * float64(unit)), nil
}
