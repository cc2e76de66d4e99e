package configs

import "testing"

// The shipped envserver.json and DefaultSettle (which carries the measurements
// behind the numbers) say the same.
func TestShippedSettleIsTheDefault(t *testing.T) {
	c, err := LoadServer("")
	if err != nil {
		t.Fatal(err)
	}
	if c.Observe.Settle == nil || *c.Observe.Settle != DefaultSettle {
		t.Errorf("envserver.json observe.settle got %+v; want DefaultSettle %+v", c.Observe.Settle, DefaultSettle)
	}
}
