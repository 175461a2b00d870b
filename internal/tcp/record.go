package tcp

import "github.com/dgramio/dgramio/internal/record"

// The record framing lives in package record (a leaf, so that kernel tcp
// links none of the userspace TCP); these names keep it reachable from
// package tcp as well.

// HeaderLen is record.HeaderLen.
const HeaderLen = record.HeaderLen

// MaxRecord is record.MaxRecord.
const MaxRecord = record.MaxRecord

// Staging is record.Staging.
type Staging = record.Staging

// Decoder is record.Decoder.
type Decoder = record.Decoder

// The errors of package record.
var (
	ErrRecordTooLarge = record.ErrRecordTooLarge
	ErrStagingFull    = record.ErrStagingFull
	ErrOversize       = record.ErrOversize
)

// AppendRecord is record.AppendRecord.
func AppendRecord(dst, payload []byte) ([]byte, error) { return record.AppendRecord(dst, payload) }

// PutRecord is record.PutRecord.
func PutRecord(dst, payload []byte) (int, error) { return record.PutRecord(dst, payload) }

// NewStaging is record.NewStaging.
func NewStaging(size int) *Staging { return record.NewStaging(size) }

// NewDecoder is record.NewDecoder.
func NewDecoder(max, bufSize int) *Decoder { return record.NewDecoder(max, bufSize) }
