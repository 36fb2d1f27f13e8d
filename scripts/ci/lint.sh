#!/usr/bin/env bash
# Static checks beyond go vet: staticcheck (all its default checks) and deadcode (no
# function in a product file that no binary reaches, but for scripts/ci/deadcode-allow.txt).
# Both run at pinned versions through go run, so go.mod stays free of them.
# Run from the repository root: bash scripts/ci/lint.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

STATICCHECK=honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE=golang.org/x/tools/cmd/deadcode@v0.51.0

echo "staticcheck ($STATICCHECK)"
go run "$STATICCHECK" ./...

echo "deadcode ($DEADCODE)"
allow="$(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' scripts/ci/deadcode-allow.txt | awk '{print $1}')"
dead="$(go run "$DEADCODE" -f '{{range .Funcs}}{{$.Path}}.{{.Name}}{{"\n"}}{{end}}' ./...)"
left=()
while IFS= read -r fn; do
	[ -n "$fn" ] || continue
	ok=0
	while IFS= read -r a; do
		case "$a" in
		*'.*') [[ "$fn" == "${a%\*}"* ]] && ok=1 ;;
		*) [[ "$fn" == "$a" ]] && ok=1 ;;
		esac
		[ "$ok" = 1 ] && break
	done <<<"$allow"
	[ "$ok" = 1 ] || left+=("$fn")
done <<<"$dead"
if [ "${#left[@]}" -gt 0 ]; then
	echo "deadcode: no binary reaches these functions; delete them, or move test-only ones into _test.go files:" >&2
	printf '  %s\n' "${left[@]}" >&2
	exit 1
fi
echo "deadcode: clean ($(grep -c . <<<"$dead" || true) allowed)"
