package progress

import (
	"bytes"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestNotATerminal: a writer that is not a terminal gets no Line, and
// the nil Line draws nothing.
func TestNotATerminal(t *testing.T) {
	var b bytes.Buffer
	l := NewLine(&b)
	if l != nil {
		t.Fatalf("NewLine(buffer) = %v, want nil", l)
	}
	l.Draw("x")
	l.Clear()
	if l.Drawn() || b.Len() != 0 {
		t.Errorf("a nil Line drew %q", b.String())
	}
}

// TestLine: Draw replaces the line in place, Clear empties it.
func TestLine(t *testing.T) {
	var b bytes.Buffer
	l := &Line{w: &b}
	l.Draw("one")
	l.Draw("two")
	if !l.Drawn() {
		t.Errorf("Drawn() = false after Draw")
	}
	l.Clear()
	if d := cmp.Diff("\r\x1b[Kone\r\x1b[Ktwo\r\x1b[K", b.String()); d != "" {
		t.Errorf("output (-want +got):\n%s", d)
	}
	if l.Drawn() {
		t.Errorf("Drawn() = true after Clear")
	}
}

func TestBar(t *testing.T) {
	for _, tc := range []struct {
		name        string
		done, total int
		want        string
	}{
		{"start", 0, 10, "runs [                              ] 0/10"},
		{"end", 10, 10, "runs [==============================] 10/10"},
		{"no total", 0, 0, "runs [                              ] 0/0"},
		{"over", 12, 10, "runs [==============================] 12/10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, Bar("runs", tc.done, tc.total, time.Now())); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
	got := Bar("runs", 5, 10, time.Now().Add(-10*time.Second))
	if want := "runs [===============               ] 5/10, about 10s left"; got != want {
		t.Errorf("half way: %q, want %q", got, want)
	}
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1536: "1.5 KiB", 3 << 20: "3.0 MiB", 5 << 30: "5.0 GiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
