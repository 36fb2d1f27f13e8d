package sharding

import "github.com/shardplan/shardplan/internal/fielderr"

// FieldError, Errors, Fieldf and AsFieldErrors are the fielderr vocabulary under the
// names this package has always given them.
type (
	FieldError = fielderr.FieldError
	Errors     = fielderr.Errors
)

// Fieldf builds a *FieldError.
func Fieldf(field, format string, args ...any) *FieldError {
	return fielderr.New(field, format, args...)
}

// AsFieldErrors flattens err into field errors. It reports false when err carries none.
func AsFieldErrors(err error) (Errors, bool) { return fielderr.As(err) }

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
