package aci

import "testing"

func TestSettleValidate(t *testing.T) {
	for _, s := range []*Settle{nil, {}, {QuietMS: 300, MaxMS: 2000}, {FirstMS: 200, QuietMS: 0, MaxMS: MaxSettleMS}} {
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: got %v; want valid", s, err)
		}
	}
	for _, s := range []*Settle{{QuietMS: -1, MaxMS: 10}, {MaxMS: MaxSettleMS + 1}, {FirstMS: -5}} {
		if err := s.Validate(); CodeOf(err) != CodeBadRequest {
			t.Errorf("%+v: got %v; want bad_request", s, err)
		}
	}
}
