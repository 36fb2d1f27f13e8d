package api

import "strconv"

// Count writes n with a noun in the singular or the plural: "1 step", "2 steps",
// "0 reductions". noun is the singular; the plural adds an s. Every text answer (the
// audit report, the CLI's summaries) counts through Count so that one vocabulary reads
// the same everywhere.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
