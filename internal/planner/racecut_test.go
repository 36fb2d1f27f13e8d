package planner

// underRace is n, or under the race detector at most race: a sweep whose every case CI's
// plain planner step checks (.ci/run names it) keeps a prefix of race cases under -race,
// whose concern is the planner's goroutines and shared memos, not each plan.
func underRace(n, race int) int {
	if raceDetector {
		return min(n, race)
	}
	return n
}
