package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
)

// Units of the figures.
const (
	Ms    = "ms"
	S     = "s"
	MiBps = "MiB/s"
	MiB   = "MiB"
	Count = "count"
)

// Figure is one line of the results: the percentiles of one measured quantity and, for the
// runtimectl side of a pair, how it compares with the baseline.
type Figure struct {
	Name        string  `json:"name"`
	Unit        string  `json:"unit"`
	P50         float64 `json:"p50"`
	P90         float64 `json:"p90"`
	P99         float64 `json:"p99"`
	N           int     `json:"n"`
	Description string  `json:"description"`
	// Better is "lower" or "higher".
	Better string `json:"better"`
	// CompareWith, Ratio, Delta, Target and Met describe the first comparison of the figure
	// (the same fields appear in Comparisons, which lists all of them).
	ComparedWith string       `json:"compared_with,omitempty"`
	Ratio        *float64     `json:"ratio,omitempty"`
	Delta        *float64     `json:"delta,omitempty"`
	Target       string       `json:"target,omitempty"`
	Met          *bool        `json:"met,omitempty"`
	Comparisons  []Comparison `json:"comparisons,omitempty"`
	Note         string       `json:"note,omitempty"`

	samples []float64
}

// Comparison is one figure compared with a baseline, on their p50s.
type Comparison struct {
	ComparedWith string  `json:"compared_with"`
	Ratio        float64 `json:"ratio"` // p50 / baseline p50
	Delta        float64 `json:"delta"` // p50 - baseline p50, in the figure's unit
	// Target is "ratio <= 0.05", "ratio >= 0.8", "delta <= 5" (in the figure's unit).
	Target string `json:"target,omitempty"`
	Met    *bool  `json:"met,omitempty"`
}

// Target is a goal for one comparison.
type Target struct {
	Kind  string // "ratio" or "delta" (with Compare), "value" (with Bound)
	Op    string // "<=" or ">="
	Value float64
}

func (t Target) String() string {
	if t.Kind == "" {
		return ""
	}
	return fmt.Sprintf("%s %s %s", t.Kind, t.Op, trimFloat(t.Value))
}

func (t Target) met(ratio, delta float64) bool {
	v := ratio
	if t.Kind == "delta" || t.Kind == "value" {
		v = delta // Bound passes the value itself as the delta from 0
	}
	if t.Op == ">=" {
		return v >= t.Value
	}
	return v <= t.Value
}

// Results is what a run writes to bench/results.json.
type Results struct {
	Header  Machine   `json:"header"`
	Figures []*Figure `json:"figures"`
	Notes   []string  `json:"notes,omitempty"`

	mu     sync.Mutex
	byName map[string]*Figure
}

// NewResults starts an empty set of results.
func NewResults(m Machine) *Results {
	return &Results{Header: m, Figures: []*Figure{}, byName: map[string]*Figure{}}
}

// Add records samples of a figure (appending to those already recorded under the name) and
// returns the figure.
func (r *Results) Add(name, unit, better, desc string, samples ...float64) *Figure {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.byName[name]
	if f == nil {
		f = &Figure{Name: name, Unit: unit, Better: better, Description: desc}
		r.byName[name] = f
		r.Figures = append(r.Figures, f)
	}
	f.samples = append(f.samples, samples...)
	f.summarize()
	return f
}

// Get returns the figure called name, or nil.
func (r *Results) Get(name string) *Figure {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byName[name]
}

// Note adds a line to the notes printed under the table.
func (r *Results) Note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// Compare compares figure name with baseline on their p50s, against target (zero: no target).
func (r *Results) Compare(name, baseline string, t Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, b := r.byName[name], r.byName[baseline]
	if f == nil || b == nil || f.N == 0 || b.N == 0 {
		return
	}
	c := Comparison{ComparedWith: baseline, Delta: round(f.P50 - b.P50), Target: t.String()}
	if b.P50 != 0 {
		c.Ratio = round(f.P50 / b.P50)
	}
	if t.Kind != "" {
		m := t.met(f.P50/b.P50, f.P50-b.P50)
		c.Met = &m
	}
	f.Comparisons = append(f.Comparisons, c)
	first := f.Comparisons[0]
	f.ComparedWith, f.Target, f.Met = first.ComparedWith, first.Target, first.Met
	ratio, delta := first.Ratio, first.Delta
	f.Ratio, f.Delta = &ratio, &delta
}

// Bound checks figure name's p50 itself against target (Kind "value"), for a target that is a
// figure rather than a comparison (bash's round trip ≤ 2 ms).
func (r *Results) Bound(name string, t Target) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.byName[name]
	if f == nil || f.N == 0 {
		return
	}
	m := t.met(0, f.P50)
	c := Comparison{ComparedWith: "(the figure itself)", Delta: f.P50, Target: t.String(), Met: &m}
	f.Comparisons = append(f.Comparisons, c)
	first := f.Comparisons[0]
	f.ComparedWith, f.Target, f.Met = first.ComparedWith, first.Target, first.Met
	if len(f.Comparisons) == 1 {
		delta := f.P50
		f.Ratio, f.Delta = nil, &delta
	}
}

func (f *Figure) summarize() {
	s := append([]float64(nil), f.samples...)
	sort.Float64s(s)
	f.N = len(s)
	f.P50, f.P90, f.P99 = round(quantile(s, 0.50)), round(quantile(s, 0.90)), round(quantile(s, 0.99))
}

// quantile is the nearest-rank quantile of sorted samples.
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	if i < 0 {
		i = 0
	}
	return sorted[i]
}

// round keeps four significant digits, enough for every figure and stable in JSON.
func round(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	mag := math.Pow(10, 3-math.Floor(math.Log10(math.Abs(v))))
	return math.Round(v*mag) / mag
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.4g", v)
	return s
}

// WriteJSON writes the results to path.
func (r *Results) WriteJSON(path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// PrintTable writes the figures as a table: percentiles, and for each comparison the ratio,
// the difference and whether the target is met.
func (r *Results) PrintTable(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.Header
	fmt.Fprintf(w, "machine: %d cores (%s), %.1f GiB, kernel %s, docker %s (API %s, %s, cgroup v%s), load %s at start, %s\n",
		h.Cores, h.CPU, float64(h.MemoryBytes)/(1<<30), h.Kernel, h.DockerVersion, h.DockerAPI, h.StorageDriver, h.CgroupVersion, h.LoadAvg, h.Date)
	rows := [][]string{{"figure", "unit", "p50", "p90", "p99", "n", "compared with", "ratio", "delta", "target", ""}}
	for _, f := range r.Figures {
		head := []string{f.Name, f.Unit, num(f.P50), num(f.P90), num(f.P99), fmt.Sprint(f.N)}
		if len(f.Comparisons) == 0 {
			rows = append(rows, append(head, "", "", "", "", ""))
			continue
		}
		for i, c := range f.Comparisons {
			if i > 0 {
				head = []string{"", "", "", "", "", ""}
			}
			verdict := ""
			if c.Met != nil {
				verdict = "MET"
				if !*c.Met {
					verdict = "MISSED"
				}
			}
			rows = append(rows, append(head, c.ComparedWith, num(c.Ratio), signed(c.Delta), c.Target, verdict))
		}
	}
	right := map[int]bool{2: true, 3: true, 4: true, 5: true, 7: true, 8: true}
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, cell := range row {
			width[i] = max(width[i], len(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			pad := strings.Repeat(" ", width[i]-len(cell))
			if right[i] {
				b.WriteString(pad + cell)
			} else {
				b.WriteString(cell + pad)
			}
			if i < len(row)-1 {
				b.WriteString("  ")
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note: "+n)
	}
}

func num(v float64) string {
	switch a := math.Abs(v); {
	case v == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", v)
	case a >= 100:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", v), "0"), ".")
	}
}

func signed(v float64) string {
	if v > 0 {
		return "+" + num(v)
	}
	return num(v)
}
