package proxy

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/runtimectl/runtimectl/egress"
)

// dnsTTL is the time to live of the resolver's answers.
const dnsTTL = 60

// dnsIdle bounds the wait for the next query on a relayed DNS stream.
const dnsIdle = 30 * time.Second

// serveDNSStream answers DNS messages framed as DNS over TCP (RFC 1035 4.2.2): a two-byte
// length, then the message.
func (p *Proxy) serveDNSStream(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	var lenb [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(dnsIdle))
		if _, err := io.ReadFull(c, lenb[:]); err != nil {
			return
		}
		q := make([]byte, binary.BigEndian.Uint16(lenb[:]))
		if _, err := io.ReadFull(c, q); err != nil {
			return
		}
		a := p.AnswerDNS(q)
		if a == nil {
			return
		}
		out := binary.BigEndian.AppendUint16(nil, uint16(len(a)))
		if _, err := c.Write(append(out, a...)); err != nil {
			return
		}
	}
}

// AnswerDNS answers one DNS query: an allowed name's A record is the relay's loopback address
// (so that code which ignores HTTP_PROXY reaches the proxy anyway), its other records are
// empty; every other name is NXDOMAIN, counted and logged as a refusal. Nothing is ever asked
// of another resolver, so nothing leaves by DNS. It returns nil for a message it cannot parse.
func (p *Proxy) AnswerDNS(query []byte) []byte {
	var parser dnsmessage.Parser
	h, err := parser.Start(query)
	if err != nil || h.Response {
		return nil
	}
	qs, err := parser.AllQuestions()
	resp := dnsmessage.Header{ID: h.ID, Response: true, OpCode: h.OpCode, RecursionDesired: h.RecursionDesired, RecursionAvailable: true}
	switch {
	case err != nil || len(qs) != 1:
		resp.RCode = dnsmessage.RCodeFormatError
		return buildDNS(resp, nil, nil)
	case h.OpCode != 0 || qs[0].Class != dnsmessage.ClassINET:
		resp.RCode = dnsmessage.RCodeNotImplemented
		return buildDNS(resp, qs, nil)
	}
	q := qs[0]
	name := egress.NormalizeHost(q.Name.String())
	if strings.HasSuffix(name, ".in-addr.arpa") || strings.HasSuffix(name, ".ip6.arpa") {
		resp.RCode = dnsmessage.RCodeNameError // reverse lookups: no names to give, nothing to refuse
		return buildDNS(resp, qs, nil)
	}
	if !p.allow.AllowsName(name) {
		resp.RCode = dnsmessage.RCodeNameError
		p.refused(refuseNotAllowed(p.words, egress.ViaDNS, name, 0, p.allow))
		return buildDNS(resp, qs, nil)
	}
	if q.Type == dnsmessage.TypeA {
		return buildDNS(resp, qs, &dnsmessage.AResource{A: p.answer.As4()})
	}
	return buildDNS(resp, qs, nil) // the name exists, with no record of that type (AAAA: IPv4 only)
}

func buildDNS(h dnsmessage.Header, qs []dnsmessage.Question, a *dnsmessage.AResource) []byte {
	b := dnsmessage.NewBuilder(make([]byte, 0, 512), h)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil
	}
	for _, q := range qs {
		if err := b.Question(q); err != nil {
			return nil
		}
	}
	if a != nil {
		if err := b.StartAnswers(); err != nil {
			return nil
		}
		if err := b.AResource(dnsmessage.ResourceHeader{Name: qs[0].Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: dnsTTL}, *a); err != nil {
			return nil
		}
	}
	msg, err := b.Finish()
	if err != nil {
		return nil
	}
	return msg
}
