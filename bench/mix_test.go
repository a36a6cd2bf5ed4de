package bench

import (
	"testing"
)

func TestParseMix(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Mix
	}{
		{"normal=70,scalper=20,broken=10", Mix{70, 20, 10}},
		{"normal=1", Mix{1, 0, 0}},
		{" scalper=3 , normal=1", Mix{1, 3, 0}},
		{"broken=0,normal=5", Mix{5, 0, 0}},
	} {
		got, err := ParseMix(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseMix(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{
		"", "normal", "normal=", "normal=x", "normal=-1", "normal=70,normal=30", "robot=5",
		"normal=0,scalper=0", "normal=1.5", "normal=99999999999", "=5", "normal=70;scalper=20",
	} {
		if m, err := ParseMix(bad); err == nil {
			t.Errorf("ParseMix(%q) = %v, want an error", bad, m)
		}
	}
}

func FuzzParseMix(f *testing.F) {
	for _, s := range []string{"normal=70,scalper=20,broken=10", "normal=1", "x", "normal=,", "broken=1000000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMix(s)
		if err != nil {
			return
		}
		if m[Normal]+m[Scalper]+m[Broken] == 0 {
			t.Fatalf("ParseMix(%q) = %v: accepted with no guests", s, m)
		}
		if again, err := ParseMix(m.String()); err != nil || again != m {
			t.Fatalf("ParseMix(%q) = %v, its String %q reads back as %v, %v", s, m, m.String(), again, err)
		}
	})
}

// TestPicker: a mix deals its kinds out in proportion, exactly over a
// cycle of its total weight and evenly within it.
func TestPicker(t *testing.T) {
	p := newPicker(DefaultMix)
	var got [kinds]int
	for i := range 100 {
		got[p.next()]++
		if i == 9 && got[Broken] != 1 {
			t.Errorf("first 10 guests hold %d broken clients, want 1", got[Broken])
		}
	}
	if got != [kinds]int{70, 20, 10} {
		t.Errorf("100 guests of %v: %v", DefaultMix, got)
	}
	only := newPicker(Mix{0, 1, 0})
	for range 5 {
		if k := only.next(); k != Scalper {
			t.Fatalf("scalper-only mix dealt %s", k)
		}
	}
}
