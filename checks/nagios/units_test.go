package nagios

import (
	"math"
	"testing"
)

func TestBaseValue(t *testing.T) {
	tests := []struct {
		value    float64
		uom      string
		want     float64
		wantUnit string
	}{
		{3, "", 3, ""},
		{1.5, "s", 1.5, "seconds"},
		{250, "ms", 0.25, "seconds"},
		{0.015, "ms", 1.5e-5, "seconds"}, // decimal shift, not 0.015/1e3
		{0.043, "ms", 4.3e-5, "seconds"},
		{900, "us", 0.0009, "seconds"},
		{1, "us", 1e-6, "seconds"},
		{-2, "ms", -0.002, "seconds"},
		{0, "ms", 0, "seconds"},
		{1e-320, "us", 0, "seconds"}, // underflows to zero, no panic
		{1024, "B", 1024, "bytes"},
		{2, "KB", 2048, "bytes"},
		{3, "MB", 3 * 1024 * 1024, "bytes"},
		{1.5, "GB", 1.5 * 1024 * 1024 * 1024, "bytes"},
		{5, "TB", 5 * 1024 * 1024 * 1024 * 1024, "bytes"},
		{1, "KiB", 1024, "bytes"},
		{1, "MiB", 1 << 20, "bytes"},
		{1, "GiB", 1 << 30, "bytes"},
		{1, "TiB", 1 << 40, "bytes"},
		{55, "%", 55, "percent"},
		{12345, "c", 12345, "counter"},
		{3, "widgets", 3, "widgets"},
		// Units are case-sensitive as the guidelines print them: "kb" or
		// "Kb" (kilobits?) are not guessed at.
		{1, "kb", 1, "kb"},
		{1, "S", 1, "S"},
	}
	for _, tt := range tests {
		v, u := Perf{Value: tt.value, UOM: tt.uom}.BaseValue()
		if v != tt.want || u != tt.wantUnit {
			t.Errorf("BaseValue(%v %q) = %v %q, want %v %q", tt.value, tt.uom, v, u, tt.want, tt.wantUnit)
		}
	}
}

func TestBaseValueUndetermined(t *testing.T) {
	for _, uom := range []string{"", "ms", "us", "s", "MB", "%"} {
		v, _ := Perf{Value: math.NaN(), UOM: uom}.BaseValue()
		if !math.IsNaN(v) {
			t.Errorf("BaseValue(U %q) = %v, want NaN", uom, v)
		}
	}
}
