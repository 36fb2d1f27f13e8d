// Package fielderr is the error vocabulary of every layer: an invalid value named by its
// path in the request as sent, with what is wrong and how to fix it. The HTTP layer turns
// them into a 400's "errors"; the domain packages (sharding, cost, propagation, planner)
// return them without knowing about HTTP.
package fielderr

import (
	"errors"
	"fmt"
	"strconv"
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

// New builds a *FieldError (format is used as is when there are no args).
func New(field, format string, args ...any) *FieldError {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &FieldError{Field: field, Message: msg}
}

// As flattens err into field errors. It reports false when err carries none.
func As(err error) (Errors, bool) {
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

// UnknownJSONField reports the field name when err is encoding/json's error for an
// object key the target type lacks (a Decoder with DisallowUnknownFields). encoding/json
// has no typed error for it, so this is the one place that reads its message.
func UnknownJSONField(err error) (string, bool) {
	if err == nil {
		return "", false
	}
	rest, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return "", false
	}
	name, uerr := strconv.Unquote(rest)
	if uerr != nil {
		name = rest
	}
	return name, true
}
