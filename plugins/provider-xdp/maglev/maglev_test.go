package maglev

import (
	"fmt"
	"math"
	"testing"
)

const m = 16381

func backends(n int) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		bs[i] = Backend{Key: fmt.Sprintf("10.0.%d.%d", i/200, 2+i%200)}
	}
	return bs
}

func shares(t []int, n int) []int {
	c := make([]int, n)
	for _, b := range t {
		c[b]++
	}
	return c
}

func TestBalance(t *testing.T) {
	for _, tc := range []struct {
		n      int
		maxDev float64 // largest share's deviation from m/n, relative
	}{{1, 0}, {2, 0.01}, {3, 0.01}, {10, 0.02}, {50, 0.03}, {256, 0.05}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			tab := Table(backends(tc.n), m)
			ideal := float64(m) / float64(tc.n)
			for i, c := range shares(tab, tc.n) {
				if dev := math.Abs(float64(c)-ideal) / ideal; dev > tc.maxDev {
					t.Errorf("backend %d owns %d buckets, ideal %.1f: off by %.1f%% (at most %.0f%%)", i, c, ideal, 100*dev, 100*tc.maxDev)
				}
			}
		})
	}
}

func TestWeights(t *testing.T) {
	for _, tc := range []struct {
		name    string
		weights []int
		want    []float64 // shares relative to the first backend
	}{
		{"double", []int{1, 2, 1}, []float64{1, 2, 1}},
		{"zero is one", []int{0, 1, 0}, []float64{1, 1, 1}},
		{"tenfold", []int{10, 1}, []float64{1, 0.1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := make([]Backend, len(tc.weights))
			for i, w := range tc.weights {
				bs[i] = Backend{Key: fmt.Sprintf("b%d", i), Weight: w}
			}
			s := shares(Table(bs, m), len(bs))
			for i, w := range tc.want {
				if r := float64(s[i]) / float64(s[0]); math.Abs(r-w)/w > 0.05 {
					t.Errorf("backend %d: %d buckets against %d, ratio %.3f, want %.2f", i, s[i], s[0], r, w)
				}
			}
		})
	}
}

func TestOrderDoesNotMatter(t *testing.T) {
	bs := backends(7)
	a := Table(bs, m)
	rev := make([]Backend, len(bs))
	for i, b := range bs {
		rev[len(bs)-1-i] = b
	}
	b := Table(rev, m)
	for i := range a {
		if bs[a[i]].Key != rev[b[i]].Key {
			t.Fatalf("bucket %d: %s in key order, %s in reverse order", i, bs[a[i]].Key, rev[b[i]].Key)
		}
	}
}

// TestDisruption: removing one of n backends moves its own buckets and
// only a few others; adding one takes about 1/(n+1) of the buckets.
func TestDisruption(t *testing.T) {
	for _, n := range []int{3, 5, 10, 50} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			bs := backends(n)
			before := Table(bs, m)
			gone := n / 2
			rest := append(append([]Backend{}, bs[:gone]...), bs[gone+1:]...)
			after := Table(rest, m)
			moved, own := 0, 0
			for i := range before {
				was := bs[before[i]].Key
				if was == bs[gone].Key {
					own++
					continue
				}
				if rest[after[i]].Key != was {
					moved++
				}
			}
			// Maglev trades a little disruption for balance: a
			// few percent of the other buckets move.
			if frac := float64(moved) / float64(m); frac > 0.03 {
				t.Errorf("removing 1 of %d backends moved %d buckets of the others (%.2f%%; its own share is %d)", n, moved, 100*frac, own)
			}
			t.Logf("n=%d: removed backend owned %d buckets, %d others moved (%.2f%% of the table)", n, own, moved, 100*float64(moved)/m)

			added := Table(append(append([]Backend{}, bs...), Backend{Key: "10.9.9.9"}), m)
			gained, moved := 0, 0
			for i := range before {
				switch k := append(append([]Backend{}, bs...), Backend{Key: "10.9.9.9"})[added[i]].Key; {
				case k == "10.9.9.9":
					gained++
				case k != bs[before[i]].Key:
					moved++
				}
			}
			ideal := float64(m) / float64(n+1)
			if math.Abs(float64(gained)-ideal)/ideal > 0.05 || float64(moved)/m > 0.03 {
				t.Errorf("adding a backend to %d: it gained %d buckets (ideal %.0f), %d others moved", n, gained, ideal, moved)
			}
		})
	}
}

func TestEmpty(t *testing.T) {
	for i, b := range Table(nil, 7) {
		if b != Empty {
			t.Fatalf("bucket %d = %d without backends", i, b)
		}
	}
}
