package harness

import "errors"

// Errors the harness wraps; each message says which process or request,
// and wraps the cause when there is one.
var (
	ErrInvalid = errors.New("harness: invalid option")
	ErrBuild   = errors.New("harness: build failed")
	ErrProcess = errors.New("harness: process failed")
	ErrRequest = errors.New("harness: request failed")
	ErrMeasure = errors.New("harness: measurement failed")
)
