package procstat

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	// The command name holds a space and both parentheses.
	line := "4242 (a) b (c) S 17 4242 4242 0 -1 4194304 100 0 0 0 7 3 2 1 20 0 1 0 98765 1000 200 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	st, err := Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	want := Stat{PID: 4242, Comm: "a) b (c", State: 'S', PPID: 17, UTime: 7, STime: 3, CUTime: 2, CSTime: 1, Start: 98765}
	if st != want {
		t.Fatalf("Parse = %+v; want %+v", st, want)
	}
	for _, bad := range []string{"", "12 (x", "12 (x) S 1 2 3", "x (y) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded; want an error", bad)
		}
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.PPID != os.Getppid() || st.Start == 0 || st.Gone() {
		t.Fatalf("Read(self) = %+v", st)
	}
	found := false
	for _, p := range All() {
		found = found || p == st || (p.PID == st.PID && p.Start == st.Start)
	}
	if !found {
		t.Fatal("All does not list this process")
	}
}
