package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a number of bytes. Configuration writes it as an integer (bytes)
// or as a string with a unit: B, KiB, MiB, GiB (powers of 1024) or KB, MB,
// GB (powers of 1000), e.g. 64KiB, 256MiB, "1.5 GiB". Units are not
// case-sensitive.
//
// *Size implements encoding.TextUnmarshaler (so mapstructure and yaml.v3 can
// decode it) and pflag.Value (so a command can bind a size flag).
type Size int64

// Binary size units.
const (
	B   Size = 1
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
)

// ParseSize reads a size such as "65536", "64KiB" or "10MB".
func ParseSize(text string) (Size, error) {
	s := strings.TrimSpace(text)
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	number, unit := s[:i], strings.TrimSpace(s[i:])
	mult, ok := sizeUnit(unit)
	if number == "" || !ok {
		return 0, fmt.Errorf("invalid size %q (expected bytes or a size such as 64KiB)", text)
	}
	if !strings.Contains(number, ".") {
		n, err := strconv.ParseInt(number, 10, 64)
		if err != nil || n > math.MaxInt64/mult {
			return 0, fmt.Errorf("invalid size %q (too large)", text)
		}
		return Size(n * mult), nil
	}
	f, err := strconv.ParseFloat(number, 64)
	if err != nil {
		return 0, fmt.Errorf("invalid size %q (expected bytes or a size such as 64KiB)", text)
	}
	bytes := f * float64(mult)
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("invalid size %q (too large)", text)
	}
	return Size(bytes), nil
}

func sizeUnit(unit string) (int64, bool) {
	switch strings.ToLower(unit) {
	case "", "b":
		return 1, true
	case "kib":
		return 1 << 10, true
	case "mib":
		return 1 << 20, true
	case "gib":
		return 1 << 30, true
	case "kb":
		return 1e3, true
	case "mb":
		return 1e6, true
	case "gb":
		return 1e9, true
	}
	return 0, false
}

// String writes the size with the largest unit that divides it exactly, so
// that ParseSize(s.String()) == s.
func (s Size) String() string {
	units := []struct {
		n    int64
		name string
	}{{1 << 30, "GiB"}, {1 << 20, "MiB"}, {1 << 10, "KiB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "KB"}}
	for _, u := range units {
		if s != 0 && int64(s)%u.n == 0 {
			return fmt.Sprintf("%d%s", int64(s)/u.n, u.name)
		}
	}
	return fmt.Sprintf("%dB", int64(s))
}

// MarshalText writes the size as String does.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads the size as ParseSize does.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Set implements pflag.Value.
func (s *Size) Set(text string) error { return s.UnmarshalText([]byte(text)) }

// Type implements pflag.Value.
func (s *Size) Type() string { return "size" }
