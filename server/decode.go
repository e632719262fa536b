package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"time"
)

// Strict decoding of request bodies. A body is one JSON object and nothing after it; every
// field it names is a field of the route (an unknown one is refused, named, with the fields
// there are); a field's value is decoded on its own so that an error names the field; then the
// request's own check (ranges) runs. `null`, an array or a number as the body is refused: a
// body of `null` used to run an empty execution.

// checker is a request that checks its ranges once decoded.
type checker interface{ check() error }

// bodyRule says whether a route may be called with no body at all.
type bodyRule int

const (
	bodyOptional bodyRule = iota // no body is an empty object
	bodyRequired                 // no body is refused
)

// invalidBody is a request body that cannot be used; its message reaches the client.
type invalidBody struct{ msg string }

func (e *invalidBody) Error() string { return e.msg }

func invalidf(format string, a ...any) error { return &invalidBody{fmt.Sprintf(format, a...)} }

// readJSON decodes a request body of at most MaxBody bytes into v (a pointer to a struct)
// and writes the error response when it cannot; no body leaves v as it is.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	return s.readJSONRule(w, r, v, bodyOptional)
}

func (s *Server) readJSONRule(w http.ResponseWriter, r *http.Request, v any, rule bodyRule) bool {
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	err := decodeStrict(body, v, rule)
	if err == nil {
		return true
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		writeError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("request body over %d bytes (serve --max-body); send less (large files go through PUT .../files/PATH)", s.cfg.MaxBody))
		return false
	}
	msg := err.Error()
	var ib *invalidBody
	if !errors.As(err, &ib) {
		msg = "read the request body: " + msg
	}
	writeError(w, http.StatusBadRequest, "invalid", msg+"; see /openapi.json for the fields")
	return false
}

// decodeStrict is readJSON's decoding, apart from HTTP.
func decodeStrict(r io.Reader, v any, rule bodyRule) error {
	dec := json.NewDecoder(r)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			if rule == bodyRequired {
				return invalidf("the request has no body: send a JSON object")
			}
			return nil
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return invalidf("the body is not JSON (at byte %d: %v)", se.Offset, err)
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return invalidf("the body ends inside its JSON value")
		}
		return err
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return invalidf("the body is %s, not a JSON object: send {\"field\": value, ...}", describeJSON(t))
	}
	// Nothing but white space may follow the object.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return invalidf("the body holds more than one JSON value: send one object")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return invalidf("the body: %v", err)
	}
	fields := jsonFields(v)
	var unknown []string
	for k := range obj {
		if _, ok := fields[k]; !ok {
			unknown = append(unknown, fmt.Sprintf("%q", k))
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		known := make([]string, 0, len(fields))
		for k := range fields {
			known = append(known, k)
		}
		sort.Strings(known)
		word := "field"
		if len(unknown) > 1 {
			word = "fields"
		}
		return invalidf("unknown %s %s (the fields are %s)", word, strings.Join(unknown, ", "), strings.Join(known, ", "))
	}
	rv := reflect.ValueOf(v).Elem()
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := obj[k]
		if string(bytes.TrimSpace(val)) == "null" {
			continue // as if absent
		}
		f := rv.FieldByIndex(fields[k])
		if err := json.Unmarshal(val, f.Addr().Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) {
				return invalidf("field %q: %s is not a %s", k, describeJSON(val), te.Type)
			}
			return invalidf("field %q: %v", k, err)
		}
	}
	if c, ok := v.(checker); ok {
		return c.check()
	}
	return nil
}

// describeJSON names a JSON value's kind for a message.
func describeJSON(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return "empty"
	}
	switch b[0] {
	case 'n':
		return "null"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 't', 'f':
		return "a boolean"
	case '{':
		return "an object"
	}
	s := string(b)
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return "the number " + s
}

// jsonFields maps the JSON names of a struct's fields (embedded structs' too) to their index.
func jsonFields(v any) map[string][]int {
	out := map[string][]int{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			idx := append(append([]int(nil), index...), i)
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
				walk(f.Type, idx)
				continue
			}
			if !f.IsExported() || name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			out[name] = idx
		}
	}
	walk(reflect.TypeOf(v).Elem(), nil)
	return out
}

// MaxDuration is the longest duration a request may give (a timeout, a TTL): a year.
const MaxDuration = 365 * 24 * time.Hour

func checkDuration(field string, d Duration) error {
	if time.Duration(d) > MaxDuration {
		return invalidf("field %q: %s is over the maximum of %s (a year); give less, or 0 for none", field, time.Duration(d), MaxDuration)
	}
	return nil
}

func (q *execRequest) check() error {
	if q.Code == "" {
		return invalidf("field \"code\" is missing or empty: give the code to run")
	}
	if err := checkDuration("timeout", q.Timeout); err != nil {
		return err
	}
	if q.Timeout > 0 && time.Duration(q.Timeout) < time.Millisecond {
		return invalidf("field \"timeout\": %s is under 1ms; give at least 0.001 (seconds), or 0 for none", time.Duration(q.Timeout))
	}
	return nil
}

func (q *startRequest) check() error {
	if q.CPUs < 0 {
		return invalidf("field \"cpus\": %v is negative; give a positive number of CPUs (0: the default)", q.CPUs)
	}
	if q.CPUs > 1024 {
		return invalidf("field \"cpus\": %v is over 1024", q.CPUs)
	}
	if q.Pids < 0 {
		return invalidf("field \"pids\": %d is negative; give a positive number (0: the default)", q.Pids)
	}
	if q.KeepSnapshots < 0 {
		return invalidf("field \"keep_snapshots\": %d is negative; give a positive number (0: the default, 10)", q.KeepSnapshots)
	}
	if err := checkDuration("idle_stop", q.IdleStop); err != nil {
		return err
	}
	return checkDuration("ttl", q.TTL)
}
