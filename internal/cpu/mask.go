package cpu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// FormatList writes cpus (ascending) as a Linux CPU list: "0-3,6,8-9".
// An empty list is "none".
func FormatList(cpus []int) string {
	if len(cpus) == 0 {
		return "none"
	}
	var b strings.Builder
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(cpus[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return b.String()
}

// FormatMask writes cpus as a Linux hexadecimal CPU mask, the format of
// /sys/class/net/<if>/queues/tx-<n>/xps_cpus and of rps_cpus: 32-bit words
// from the highest to the lowest, comma-separated, the lower words padded to
// 8 digits ("1", "3", "1,00000000" for CPU 32). Negative CPUs are ignored;
// an empty list is "0".
func FormatMask(cpus []int) string {
	hi := -1
	for _, c := range cpus {
		if c > hi {
			hi = c
		}
	}
	if hi < 0 {
		return "0"
	}
	words := make([]uint32, hi/32+1)
	for _, c := range cpus {
		if c >= 0 {
			words[c/32] |= 1 << (c % 32)
		}
	}
	var b strings.Builder
	for i := len(words) - 1; i >= 0; i-- {
		if i == len(words)-1 {
			b.WriteString(strconv.FormatUint(uint64(words[i]), 16))
			continue
		}
		s := strconv.FormatUint(uint64(words[i]), 16)
		b.WriteByte(',')
		b.WriteString(strings.Repeat("0", 8-len(s)))
		b.WriteString(s)
	}
	return b.String()
}

// maxMaskWords bounds ParseMask (8192 CPUs, the kernel's NR_CPUS limit).
const maxMaskWords = 256

// ParseMask reads a Linux hexadecimal CPU mask ("00000003",
// "1,00000000", with or without a trailing newline) and returns its CPUs,
// ascending. Each comma-separated word holds 32 bits (at most 8 hex digits).
func ParseMask(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("cpu mask: empty")
	}
	words := strings.Split(s, ",")
	if len(words) > maxMaskWords {
		return nil, fmt.Errorf("cpu mask: %d words, at most %d", len(words), maxMaskWords)
	}
	var cpus []int
	for i := len(words) - 1; i >= 0; i-- {
		w := words[i]
		if w == "" || len(w) > 8 {
			return nil, fmt.Errorf("cpu mask %q: word %q is not 1 to 8 hex digits", s, w)
		}
		v, err := strconv.ParseUint(w, 16, 32)
		if err != nil {
			return nil, fmt.Errorf("cpu mask %q: %w", s, err)
		}
		base := (len(words) - 1 - i) * 32
		for bit := 0; bit < 32; bit++ {
			if v&(1<<bit) != 0 {
				cpus = append(cpus, base+bit)
			}
		}
	}
	return cpus, nil
}
