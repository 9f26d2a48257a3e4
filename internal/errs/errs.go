// Package errs is hetsched's one error taxonomy. Every layer returns *Error
// (or wraps one); the HTTP status of each code is defined here and nowhere
// else, so the API and the CLI agree on what a failure means.
package errs

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Code is the machine-readable class of an error, as sent in the API's
// {"error":{"code":...}} body.
type Code string

// The codes of API.md.
const (
	InvalidArgument  Code = "invalid_argument"
	Unauthenticated  Code = "unauthenticated"
	PermissionDenied Code = "permission_denied"
	NotFound         Code = "not_found"
	AlreadyExists    Code = "already_exists"
	Conflict         Code = "conflict"
	TooLarge         Code = "too_large"
	QuotaExceeded    Code = "quota_exceeded"
	RateLimited      Code = "rate_limited"
	Unavailable      Code = "unavailable"
	// UnsupportedMediaType: a write whose Content-Type is not JSON (or the
	// CLI's YAML); it keeps browser pages from posting "simple" requests.
	UnsupportedMediaType Code = "unsupported_media_type"
	// Misdirected: with auth off, a Host that is neither loopback nor the
	// listen address (DNS rebinding).
	Misdirected Code = "misdirected"
	// MethodNotAllowed: a known path with another method (Allow lists
	// those it has).
	MethodNotAllowed Code = "method_not_allowed"
	// RequestTimeout: the client sent its body too slowly.
	RequestTimeout Code = "request_timeout"
	// InsufficientStorage: the store's free-space reserve is reached;
	// writes are refused, reads still work.
	InsufficientStorage Code = "insufficient_storage"
	// Internal is a bug in hetsched; it is the only code that maps to 500.
	Internal Code = "internal"
)

// Error carries a code, the offending field (dotted path, may be empty) and
// a message meant for a person.
type Error struct {
	Code    Code
	Field   string
	Message string
	Err     error // optional cause
}

func (e *Error) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", e.Code, Clip(e.Field), e.Message) // a field path may hold a client's key
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// New builds an error with a formatted message. String arguments longer
// than MaxEcho bytes are cut (Clip): an error echoes at most that much of
// an offending value back.
func New(code Code, field, format string, args ...any) *Error {
	copied := false
	for i, a := range args {
		var long string
		switch v := a.(type) {
		case string:
			long = v
		case []byte:
			long = string(v)
		}
		if len(long) <= MaxEcho {
			continue
		}
		if !copied { // the caller's slice (args...) is left as it was
			args, copied = append([]any(nil), args...), true
		}
		args[i] = Clip(long)
	}
	return &Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// MaxEcho is how many bytes of an offending value an error message quotes.
const MaxEcho = 200

// Clip cuts s to at most MaxEcho bytes at a character boundary, marking
// the cut with the number of bytes left out.
func Clip(s string) string { return ClipTo(s, MaxEcho) }

// ClipTo cuts s to at most n bytes at a character boundary, marking the
// cut with the number of bytes left out.
func ClipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + fmt.Sprintf("…(%d more bytes)", len(s)-i)
}

// Invalid is shorthand for an InvalidArgument error on a field.
func Invalid(field, format string, args ...any) *Error {
	return New(InvalidArgument, field, format, args...)
}

// Wrap attaches a code and field to a cause, keeping its message.
func Wrap(code Code, field string, err error) *Error {
	return &Error{Code: code, Field: field, Message: err.Error(), Err: err}
}

// Prefix returns err with its field prefixed by parent ("resources" +
// "cpu" = "resources.cpu"); non-*Error errors become InvalidArgument.
func Prefix(parent string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		c := *e
		switch {
		case c.Field == "":
			c.Field = parent
		case parent != "":
			if c.Field[0] == '[' {
				c.Field = parent + c.Field
			} else {
				c.Field = parent + "." + c.Field
			}
		}
		return &c
	}
	return Wrap(InvalidArgument, parent, err)
}

// CodeOf returns the code of err, Internal when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// FieldOf returns the field of err, "" when it carries none.
func FieldOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Field
	}
	return ""
}

// HTTPStatus maps a code to its HTTP status: the one place this mapping lives.
// (Plain numbers keep this package, which the pure core imports, free of net.)
func HTTPStatus(c Code) int {
	switch c {
	case InvalidArgument:
		return 400
	case Unauthenticated:
		return 401
	case PermissionDenied:
		return 403
	case NotFound:
		return 404
	case AlreadyExists, Conflict:
		return 409
	case MethodNotAllowed:
		return 405
	case RequestTimeout:
		return 408
	case TooLarge:
		return 413
	case UnsupportedMediaType:
		return 415
	case Misdirected:
		return 421
	case QuotaExceeded:
		return 422
	case RateLimited:
		return 429
	case Unavailable:
		return 503
	case InsufficientStorage:
		return 507
	default:
		return 500
	}
}
