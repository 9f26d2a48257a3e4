package errs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestHTTPStatus(t *testing.T) {
	want := map[Code]int{
		InvalidArgument: 400, Unauthenticated: 401, PermissionDenied: 403, NotFound: 404,
		AlreadyExists: 409, Conflict: 409, TooLarge: 413, QuotaExceeded: 422,
		RateLimited: 429, Unavailable: 503, Internal: 500, Code("made-up"): 500,
		MethodNotAllowed: 405, RequestTimeout: 408, UnsupportedMediaType: 415, Misdirected: 421, InsufficientStorage: 507,
	}
	for c, s := range want {
		if got := HTTPStatus(c); got != s {
			t.Errorf("HTTPStatus(%s) = %d, want %d", c, got, s)
		}
	}
}

func TestPrefixBuildsDottedFields(t *testing.T) {
	cases := []struct {
		parent string
		err    error
		field  string
	}{
		{"resources", Invalid("cpu", "bad"), "resources.cpu"},
		{"alternatives", Invalid("[0].speed", "bad"), "alternatives[0].speed"},
		{"resources", Invalid("", "bad"), "resources"},
		{"", Invalid("cpu", "bad"), "cpu"},
		{"lease", errors.New("plain"), "lease"},
	}
	for _, c := range cases {
		err := Prefix(c.parent, c.err)
		if FieldOf(err) != c.field {
			t.Errorf("Prefix(%q, %v) field %q, want %q", c.parent, c.err, FieldOf(err), c.field)
		}
		if CodeOf(err) != InvalidArgument {
			t.Errorf("Prefix(%q, %v) code %s", c.parent, c.err, CodeOf(err))
		}
	}
	if Prefix("x", nil) != nil {
		t.Error("Prefix of nil must be nil")
	}
	orig := Invalid("cpu", "bad")
	_ = Prefix("resources", orig)
	if orig.Field != "cpu" {
		t.Error("Prefix must not modify its argument")
	}
}

func TestCodeAndFieldThroughWrapping(t *testing.T) {
	e := New(NotFound, "id", "no task %q", "t1")
	wrapped := fmt.Errorf("outer: %w", e)
	if CodeOf(wrapped) != NotFound || FieldOf(wrapped) != "id" {
		t.Errorf("lost code or field through wrapping: %s %q", CodeOf(wrapped), FieldOf(wrapped))
	}
	if CodeOf(errors.New("x")) != Internal || FieldOf(errors.New("x")) != "" {
		t.Error("a plain error is Internal with no field")
	}
	if e.Error() != `not_found: id: no task "t1"` {
		t.Errorf("message %q", e.Error())
	}
	cause := errors.New("disk")
	w := Wrap(Unavailable, "", cause)
	if !errors.Is(w, cause) || w.Error() != "unavailable: disk" {
		t.Errorf("Wrap: %v", w)
	}
}

func TestEchoedValuesAreClipped(t *testing.T) {
	long := strings.Repeat("x", 70_000)
	e := Invalid("cpu", "bad quantity %q", long)
	if len(e.Message) > MaxEcho+64 {
		t.Fatalf("message of %d bytes echoes the whole value", len(e.Message))
	}
	if !strings.Contains(e.Message, "more bytes") {
		t.Errorf("the cut is not marked: %q", e.Message)
	}
	e = New(InvalidArgument, "", "%s", []byte(long))
	if len(e.Message) > MaxEcho+64 {
		t.Fatalf("[]byte argument not clipped: %d bytes", len(e.Message))
	}
	// A multi-byte character is never split.
	if c := Clip(strings.Repeat("é", 150)); !utf8.ValidString(c) {
		t.Errorf("Clip split a character: %q", c)
	}
	if Clip("short") != "short" {
		t.Error("a short value must be kept whole")
	}
}
