package harness

import (
	"errors"
	"fmt"
)

// Errors the harness wraps; each message says which process or request,
// and wraps the cause when there is one.
var (
	ErrInvalid = errors.New("harness: invalid option")
	ErrBuild   = errors.New("harness: build failed")
	ErrProcess = errors.New("harness: process failed")
	ErrRequest = errors.New("harness: request failed")
	ErrMeasure = errors.New("harness: measurement failed")
)

// OptionError is Run's refusal of one option; it wraps ErrInvalid. Its
// message reads "Field Value Reason".
type OptionError struct {
	// Field is the Options field refused, dotted when nested
	// ("Load.Requests").
	Field string
	// Value is the field's value as Run refused it, defaults applied.
	Value any
	// Reason says what is wrong with the value, naming no other field,
	// e.g. "is under 50ms".
	Reason string
}

func (e *OptionError) Error() string {
	return fmt.Sprintf("%v: %s %v %s", ErrInvalid, e.Field, e.Value, e.Reason)
}

func (e *OptionError) Unwrap() error { return ErrInvalid }

// refuse is the OptionError for field's value v and why it is refused.
func refuse(field string, v any, reason string, args ...any) error {
	return &OptionError{Field: field, Value: v, Reason: fmt.Sprintf(reason, args...)}
}
