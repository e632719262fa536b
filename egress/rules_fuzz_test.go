package egress

import "testing"

// FuzzParseRule: whatever an operator types, ParseRule returns a rule whose canonical form
// parses back to itself, or an error; it never panics.
func FuzzParseRule(f *testing.F) {
	for _, s := range []string{"pypi.org", "*.example.com:8443", "[fd00::5]:443", "10.0.0.5", "a..b", "*", "x:0", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRule(s)
		if err != nil {
			return
		}
		back, err := ParseRule(r.String())
		if err != nil || back != r {
			t.Fatalf("%q: canonical %q parses to %+v, %v", s, r.String(), back, err)
		}
		a := Allowlist{r}
		if r.Addr.IsValid() && !a.Allows(r.Addr.String(), r.Ports()[0]) {
			t.Fatalf("%q does not allow its own address", s)
		}
		if !r.Addr.IsValid() && !r.Wildcard && !a.Allows(r.Name, r.Ports()[0]) {
			t.Fatalf("%q does not allow its own name", s)
		}
	})
}
