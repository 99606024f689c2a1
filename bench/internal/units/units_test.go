package units

import "testing"

// TestFormats pins each format at the edges where it changes unit or
// precision: the results files already written hold figures in these
// forms, and figcheck compares the READMEs' quotes with them as text.
func TestFormats(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Count(2), "2"},
		{Count(2.5), "2"},
		{MiB(1.5 * (1 << 20)), "1.5 MiB"},
		{Ops(999_499), "999 k"},
		{Ops(1_000_000), "1.00 M"},
		{Ops(1_234_567), "1.23 M"},
		{Dur(9.5e-6), "9.50 µs"},
		{Dur(10e-6), "10 µs"},
		{Dur(999e-6), "999 µs"},
		{Dur(1e-3), "1.00 ms"},
		{Dur(2.5), "2.50 s"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
