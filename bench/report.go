package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Units of a Row's Value and of its baseline.
const (
	UnitMs      = "ms"     // a duration in milliseconds
	UnitPerSec  = "/s"     // a rate
	UnitBytes   = "bytes"  // a size
	UnitCount   = "count"  // a plain number
	UnitPercent = "%"      // a share
	UnitRatio   = "x"      // a dimensionless factor
	UnitEvents  = "events" // a count of events
	UnitSubs    = "subscribers"
)

// Row is one figure of a suite, with the baseline measured in the same
// run next to it. Ratio is always Value / Baseline.Value: for a latency or
// a size above 1 means "costs that many times the baseline", for a rate
// below 1 means "reaches that share of the baseline". A row without a
// meaningful baseline has none, and no ratio.
type Row struct {
	Figure   string    `json:"figure"`
	Value    float64   `json:"value"`
	Unit     string    `json:"unit"`
	Baseline *Baseline `json:"baseline,omitempty"`
	Ratio    *float64  `json:"ratio,omitempty"`
}

// jsonNum is a float for JSON: null when it is not a number (a figure
// this platform cannot measure, such as RSS without /proc).
func jsonNum(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

// MarshalJSON writes a value that is not a number as null.
func (r Row) MarshalJSON() ([]byte, error) {
	type row struct {
		Figure   string    `json:"figure"`
		Value    *float64  `json:"value"`
		Unit     string    `json:"unit"`
		Baseline *Baseline `json:"baseline,omitempty"`
		Ratio    *float64  `json:"ratio,omitempty"`
	}
	return json.Marshal(row{Figure: r.Figure, Value: jsonNum(r.Value), Unit: r.Unit, Baseline: r.Baseline, Ratio: r.Ratio})
}

// MarshalJSON writes a value that is not a number as null.
func (b Baseline) MarshalJSON() ([]byte, error) {
	type baseline struct {
		Name  string   `json:"name"`
		Value *float64 `json:"value"`
	}
	return json.Marshal(baseline{Name: b.Name, Value: jsonNum(b.Value)})
}

// Baseline is what a figure is compared with: the physical limit it builds
// on, measured in the same run on the same machine.
type Baseline struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Check is one correctness check. A suite fails exactly when one of its
// checks fails; no check ever depends on how fast the machine is.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Result is one suite's report.
type Result struct {
	Suite string `json:"suite"`
	// Params says what was run (sizes, backends, stores).
	Params string `json:"params,omitempty"`
	// Skipped, when set, says why the suite (or hook) did not run; a
	// skipped suite has no rows and passes.
	Skipped string   `json:"skipped,omitempty"`
	Rows    []Row    `json:"rows,omitempty"`
	Checks  []Check  `json:"checks,omitempty"`
	Notes   []string `json:"notes,omitempty"`
	// Parts are sub-results (the hooks suite has one per hook).
	Parts          []*Result `json:"parts,omitempty"`
	ElapsedSeconds float64   `json:"elapsedSeconds"`
}

// Passed reports whether every check of the result and of its parts
// passed.
func (r *Result) Passed() bool {
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	for _, p := range r.Parts {
		if !p.Passed() {
			return false
		}
	}
	return true
}

// Failures lists the failed checks (with the part's suite name).
func (r *Result) Failures() []string {
	var out []string
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, fmt.Sprintf("%s: %s: %s", r.Suite, c.Name, c.Detail))
		}
	}
	for _, p := range r.Parts {
		out = append(out, p.Failures()...)
	}
	return out
}

// row adds a figure without a baseline.
func (r *Result) row(figure string, v float64, unit string) {
	r.Rows = append(r.Rows, Row{Figure: figure, Value: v, Unit: unit})
}

// vs adds a figure with its baseline; the ratio is left out when the
// baseline is zero or either value is not a number.
func (r *Result) vs(figure string, v float64, unit, baseName string, base float64) {
	row := Row{Figure: figure, Value: v, Unit: unit, Baseline: &Baseline{Name: baseName, Value: base}}
	if base != 0 && !math.IsNaN(base) && !math.IsNaN(v) && !math.IsInf(base, 0) && !math.IsInf(v, 0) {
		ratio := v / base
		row.Ratio = &ratio
	}
	r.Rows = append(r.Rows, row)
}

// vsCount is vs for a count of rare things per unit of work (page
// faults, thread sleeps): a baseline under countFloor a unit is a handful
// over a whole run, and a ratio to it (thousands of x, swinging with that
// handful) says nothing, so it is left out, as for a baseline of zero.
func (r *Result) vsCount(figure string, v float64, baseName string, base float64) {
	r.vs(figure, v, UnitCount, baseName, base)
	if base < countFloor {
		r.Rows[len(r.Rows)-1].Ratio = nil
	}
}

// countFloor is the least baseline per unit vsCount gives a ratio to.
const countFloor = 0.01

// check adds a correctness check.
func (r *Result) check(name string, ok bool, format string, args ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// note adds a line of explanation.
func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Machine describes where a report was measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu,omitempty"`
	GoVersion string `json:"goVersion"`
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	MemTotal  uint64 `json:"memTotalBytes,omitempty"`
}

// ThisMachine describes the running machine.
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	m.MemTotal = procKiB("/proc/meminfo", "MemTotal:") * 1024
	return m
}

// Report is a whole `codesession bench` run.
type Report struct {
	Machine Machine   `json:"machine"`
	Started time.Time `json:"started"`
	Results []*Result `json:"results"`
	// Passed is false when any correctness check failed.
	Passed bool `json:"passed"`
}

// NewReport gathers results.
func NewReport(started time.Time, results []*Result) *Report {
	rep := &Report{Machine: ThisMachine(), Started: started, Results: results, Passed: true}
	for _, r := range results {
		if !r.Passed() {
			rep.Passed = false
		}
	}
	return rep
}

// WriteJSON writes the report as indented JSON.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// WriteText writes the report as human tables.
func (rep *Report) WriteText(w io.Writer) error {
	m := rep.Machine
	fmt.Fprintf(w, "machine: %d CPUs", m.CPUs)
	if m.CPU != "" {
		fmt.Fprintf(w, " (%s)", m.CPU)
	}
	if m.MemTotal > 0 {
		fmt.Fprintf(w, ", %.1f GiB", float64(m.MemTotal)/(1<<30))
	}
	fmt.Fprintf(w, ", %s %s/%s\n", m.GoVersion, m.OS, m.Arch)
	for _, r := range rep.Results {
		fmt.Fprintln(w)
		writeResult(w, r, "")
	}
	fmt.Fprintln(w)
	if rep.Passed {
		fmt.Fprintln(w, "verdict: PASS (correctness checks only; no figure is judged against a speed threshold)")
	} else {
		fmt.Fprintln(w, "verdict: FAIL (a correctness check failed)")
	}
	return nil
}

func writeResult(w io.Writer, r *Result, indent string) {
	fmt.Fprintf(w, "%s== %s", indent, r.Suite)
	if r.Params != "" {
		fmt.Fprintf(w, ": %s", r.Params)
	}
	if r.ElapsedSeconds > 0 {
		fmt.Fprintf(w, " (%.1fs)", r.ElapsedSeconds)
	}
	fmt.Fprintln(w)
	if r.Skipped != "" {
		fmt.Fprintf(w, "%s   skipped: %s\n", indent, r.Skipped)
	}
	if len(r.Rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "%s   figure\tvalue\tbaseline (same run)\t\tratio\n", indent)
		for _, row := range r.Rows {
			base, bv, ratio := "", "", "-"
			if row.Baseline != nil {
				base, bv = row.Baseline.Name, FormatValue(row.Baseline.Value, row.Unit)
			}
			if row.Ratio != nil {
				ratio = formatRatio(*row.Ratio)
			}
			fmt.Fprintf(tw, "%s   %s\t%s\t%s\t%s\t%s\n", indent, row.Figure, FormatValue(row.Value, row.Unit), base, bv, ratio)
		}
		tw.Flush()
	}
	for _, c := range r.Checks {
		mark := "PASS"
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s   %s  %s: %s\n", indent, mark, c.Name, c.Detail)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "%s   note: %s\n", indent, n)
	}
	for _, p := range r.Parts {
		writeResult(w, p, indent+"   ")
	}
}

// FormatValue renders a value in its unit for the human table.
func FormatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	switch unit {
	case UnitMs:
		switch {
		case v == 0:
			return "0"
		case v < 0.001:
			return fmt.Sprintf("%.0fns", v*1e6)
		case v < 1:
			return fmt.Sprintf("%.1fµs", v*1e3)
		case v < 1000:
			return fmt.Sprintf("%.2fms", v)
		default:
			return fmt.Sprintf("%.2fs", v/1000)
		}
	case UnitPerSec:
		return humanNumber(v) + "/s"
	case UnitBytes:
		switch {
		case v >= 1<<30:
			return fmt.Sprintf("%.2f GiB", v/(1<<30))
		case v >= 1<<20:
			return fmt.Sprintf("%.1f MiB", v/(1<<20))
		case v >= 1<<10:
			return fmt.Sprintf("%.1f KiB", v/(1<<10))
		default:
			return fmt.Sprintf("%.0f B", v)
		}
	case UnitPercent:
		return fmt.Sprintf("%.1f%%", v)
	case UnitRatio:
		return fmt.Sprintf("%.2fx", v)
	default:
		if v == math.Trunc(v) {
			return humanNumber(v)
		}
		return fmt.Sprintf("%.2f", v)
	}
}

func humanNumber(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.1fk", v/1e3)
	case v >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

func formatRatio(r float64) string {
	switch {
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	default:
		return fmt.Sprintf("%.2fx", r)
	}
}
