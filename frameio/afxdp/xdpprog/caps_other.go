//go:build !linux

package xdpprog

// lacksBPFCaps reports false: capabilities are Linux's.
func lacksBPFCaps() bool { return false }
