package proxy

import (
	"testing"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/runtimectl/runtimectl/egress"
)

// FuzzAnswerDNS: any bytes the session sends its resolver get a parseable answer or none, and
// an A record only for an allowed name.
func FuzzAnswerDNS(f *testing.F) {
	p, err := New(egress.Config{Session: "f", Allow: []string{"allowed.test", "*.wild.test"}})
	if err != nil {
		f.Fatal(err)
	}
	defer p.Close()
	for _, name := range []string{"allowed.test.", "denied.test.", "a.wild.test.", "1.0.0.127.in-addr.arpa."} {
		b := dnsmessage.NewBuilder(nil, dnsmessage.Header{ID: 1})
		b.StartQuestions()
		b.Question(dnsmessage.Question{Name: dnsmessage.MustNewName(name), Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET})
		q, _ := b.Finish()
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, q []byte) {
		a := p.AnswerDNS(q)
		if a == nil {
			return
		}
		var m dnsmessage.Message
		if err := m.Unpack(a); err != nil {
			t.Fatalf("answer does not parse: %v", err)
		}
		for _, rr := range m.Answers {
			if !p.allow.AllowsName(egress.NormalizeHost(rr.Header.Name.String())) {
				t.Fatalf("an answer for %s, which is not allowed", rr.Header.Name)
			}
		}
	})
}
