package sharding

import (
	"errors"
	"strings"
)

// FieldError is one invalid value: Field is its path in the request as sent
// ("source.dims[1].axes[0]", "source[1][0]", "mesh.axes[2].size"), Message says what is
// wrong and how to fix it.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Errors is a list of field errors; it is an error itself when non-empty.
type Errors []*FieldError

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

// Err returns es as an error, or nil when es is empty.
func (es Errors) Err() error {
	if len(es) == 0 {
		return nil
	}
	return es
}

// Fieldf builds a *FieldError.
func Fieldf(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: sprintf(format, args...)}
}

// AsFieldErrors flattens err into field errors. It reports false when err carries none.
func AsFieldErrors(err error) (Errors, bool) {
	var es Errors
	if errors.As(err, &es) {
		return es, true
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		return Errors{fe}, true
	}
	return nil, false
}

// join appends a child path element to a field path: join("source", "dims") = "source.dims".
func join(base, child string) string {
	if base == "" {
		return child
	}
	return base + "." + child
}

// index appends an array index to a field path: index("source", 1) = "source[1]".
func index(base string, i int) string {
	return base + "[" + itoa(i) + "]"
}
