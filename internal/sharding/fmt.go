package sharding

import (
	"fmt"
	"strconv"
)

func sprintf(format string, args ...any) string {
	if len(args) == 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func itoa(i int) string { return strconv.Itoa(i) }
