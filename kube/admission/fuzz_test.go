package admission

import (
	"errors"
	"testing"
)

// parseRates never panics; it accepts only finite rates >= 0 of distinct
// types, and an error wraps nothing surprising.
func FuzzParseRates(f *testing.F) {
	for _, s := range []string{"v100=3.2,k80=1", "Tesla-V100-SXM2-16GB=2", "", "=", "v100=1,v100=2", "a=1e400", "k80=-0", "p100= 4 ,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rates, err := parseRates(s)
		if err != nil {
			if rates != nil || errors.Is(err, ErrConfig) {
				t.Fatalf("%q: rates %v with error %v", s, rates, err)
			}
			return
		}
		if len(rates) == 0 {
			t.Fatalf("%q: no rates and no error", s)
		}
		for typ, v := range rates {
			if !(v >= 0) || v > 1e12 || typ.Validate() != nil {
				t.Fatalf("%q: rate %v on %q", s, v, typ)
			}
		}
	})
}
