package hlo

import "context"

// Parse is ParseContext without a deadline, for tests.
func Parse(src string, lim Limits) (*Module, error) {
	return ParseContext(context.Background(), src, lim)
}
