package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ParseRate parses a message rate: "20000", "20k", "1.6M" (k = 1000,
// M = 1000000). It must be positive.
func ParseRate(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mul := 1.0
	switch {
	case strings.HasSuffix(t, "k"), strings.HasSuffix(t, "K"):
		mul, t = 1e3, t[:len(t)-1]
	case strings.HasSuffix(t, "M"), strings.HasSuffix(t, "m"):
		mul, t = 1e6, t[:len(t)-1]
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, fmt.Errorf("rate %q: want a positive number of messages per second, like 20k or 1.6M", s)
	}
	return v * mul, nil
}

// ParseRates parses a comma-separated list of rates.
func ParseRates(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		r, err := ParseRate(f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("rates %q: no rate given", s)
	}
	return out, nil
}

// FormatRate writes a rate the way the tables show it: "20k", "613k",
// "1.6M", "950".
func FormatRate(r float64) string {
	switch {
	case r >= 999500: // would round to 1000k
		return strconv.FormatFloat(math.Round(r/1e5)/10, 'f', -1, 64) + "M"
	case r >= 1e3:
		return strconv.FormatFloat(math.Round(r/1e3), 'f', -1, 64) + "k"
	default:
		return strconv.FormatFloat(math.Round(r), 'f', -1, 64)
	}
}

// FormatLoss writes a loss percentage as the tables show it: "0%", "0.04%",
// "0.3%", "12%".
func FormatLoss(pct float64) string {
	switch {
	case pct <= 0:
		return "0%"
	case pct < 0.1:
		return strconv.FormatFloat(pct, 'f', 2, 64) + "%"
	case pct < 1:
		return strconv.FormatFloat(pct, 'f', 1, 64) + "%"
	default:
		return strconv.FormatFloat(math.Round(pct), 'f', 0, 64) + "%"
	}
}

// FormatUs writes a latency in microseconds: one decimal below 1000 µs
// ("17.2"), whole microseconds above ("1226").
func FormatUs(us float64) string {
	if us < 1000 {
		return strconv.FormatFloat(us, 'f', 1, 64)
	}
	return strconv.FormatFloat(math.Round(us), 'f', 0, 64)
}
