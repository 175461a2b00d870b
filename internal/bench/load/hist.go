package load

import (
	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// histMax is the largest value a Hist records, in nanoseconds; larger values
// are recorded as histMax and counted in Clamped.
const histMax = int64(60e9)

// Hist is an HDR histogram of durations in nanoseconds, 3 significant
// digits, from 1 ns to 60 s. Record does not allocate.
type Hist struct {
	h *hdr.Histogram
	// Clamped counts values outside [0, 60 s] recorded at the nearest bound.
	Clamped uint64
}

// NewHist returns an empty histogram (about 200 KiB).
func NewHist() *Hist { return &Hist{h: hdr.New(1, histMax, 3)} }

// Record adds one value in nanoseconds.
func (h *Hist) Record(ns int64) {
	if ns < 0 {
		ns = 0
		h.Clamped++
	} else if ns > histMax {
		ns = histMax
		h.Clamped++
	}
	_ = h.h.RecordValue(ns) // cannot fail: ns is in range
}

// Reset empties the histogram (Clamped too).
func (h *Hist) Reset() {
	h.h.Reset()
	h.Clamped = 0
}

// Count returns the number of values recorded.
func (h *Hist) Count() int64 { return h.h.TotalCount() }

// Summary is a histogram's percentiles in microseconds.
type Summary struct {
	Count  int64   `json:"count"`
	P50Us  float64 `json:"p50_us"`
	P90Us  float64 `json:"p90_us"`
	P99Us  float64 `json:"p99_us"`
	P999Us float64 `json:"p999_us"`
	MaxUs  float64 `json:"max_us"`
	MeanUs float64 `json:"mean_us"`
}

// Summary returns the percentiles; all zero when nothing was recorded.
func (h *Hist) Summary() Summary {
	if h.h.TotalCount() == 0 {
		return Summary{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1e3 }
	return Summary{
		Count:  h.h.TotalCount(),
		P50Us:  us(h.h.ValueAtQuantile(50)),
		P90Us:  us(h.h.ValueAtQuantile(90)),
		P99Us:  us(h.h.ValueAtQuantile(99)),
		P999Us: us(h.h.ValueAtQuantile(99.9)),
		MaxUs:  us(h.h.Max()),
		MeanUs: h.h.Mean() / 1e3,
	}
}

// Encode returns the histogram in HdrHistogram's compressed V2 form, so that
// a report can merge repeats or plot the whole distribution later.
func (h *Hist) Encode() ([]byte, error) { return h.h.Encode(hdr.V2CompressedEncodingCookieBase) }
