package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// The HTTP status codes a StatusSet can hold.
const (
	minStatus = 100
	maxStatus = 599
)

// StatusSet is a set of HTTP status codes 100-599. The zero StatusSet is
// empty. It is a small array value: copy it freely, compare it with ==, and
// read it from any number of goroutines.
type StatusSet struct {
	bits [(maxStatus + 64) / 64]uint64 // bit c is status c
}

// Contains reports whether code is in s. Codes outside 100-599 never are.
func (s StatusSet) Contains(code int) bool {
	if code < minStatus || code > maxStatus {
		return false
	}
	return s.bits[code/64]&(1<<(code%64)) != 0
}

// add puts code, which must be within 100-599, in s.
func (s *StatusSet) add(code int) {
	s.bits[code/64] |= 1 << (code % 64)
}

// String returns s in the form ParseStatusRanges reads, with codes in order
// and runs written as ranges ("200-399,404"); "" for the empty set.
func (s StatusSet) String() string {
	var parts []string
	for lo := minStatus; lo <= maxStatus; lo++ {
		if !s.Contains(lo) {
			continue
		}
		hi := lo
		for hi < maxStatus && s.Contains(hi+1) {
			hi++
		}
		if hi == lo {
			parts = append(parts, strconv.Itoa(lo))
		} else {
			parts = append(parts, strconv.Itoa(lo)+"-"+strconv.Itoa(hi))
		}
		lo = hi
	}
	return strings.Join(parts, ",")
}

// ParseStatusRanges parses a comma-separated list of status codes and lo-hi
// ranges, such as "200-399" or "200,204,300-399", into a StatusSet. Spaces
// around entries are ignored. Codes must be within 100-599 and a range's lo
// at most its hi. An empty list is an error: a set that matches nothing is
// never what a health check means.
func ParseStatusRanges(s string) (StatusSet, error) {
	var set StatusSet
	if strings.TrimSpace(s) == "" {
		return set, errors.New("empty status list")
	}
	for entry := range strings.SplitSeq(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			return StatusSet{}, errors.New("empty entry in status list")
		}
		loStr, hiStr, isRange := strings.Cut(entry, "-")
		lo, err := parseStatus(strings.TrimSpace(loStr))
		if err != nil {
			return StatusSet{}, err
		}
		hi := lo
		if isRange {
			if hi, err = parseStatus(strings.TrimSpace(hiStr)); err != nil {
				return StatusSet{}, err
			}
			if lo > hi {
				return StatusSet{}, fmt.Errorf("range %d-%d ends before it starts", lo, hi)
			}
		}
		for c := lo; c <= hi; c++ {
			set.add(c)
		}
	}
	return set, nil
}

// parseStatus parses one status code 100-599 written in decimal digits.
func parseStatus(s string) (int, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" || len(s) > 3 {
		return 0, fmt.Errorf("%q is not a status code", s)
	}
	code, _ := strconv.Atoi(s)
	if code < minStatus || code > maxStatus {
		return 0, fmt.Errorf("status %d is out of range %d-%d", code, minStatus, maxStatus)
	}
	return code, nil
}

// retryStatus parses a Retries.On entry that is a status code 500-599.
func retryStatus(s string) (int, bool) {
	code, err := parseStatus(s)
	if err != nil || code < 500 {
		return 0, false
	}
	return code, true
}
