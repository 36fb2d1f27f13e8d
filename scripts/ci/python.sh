#!/usr/bin/env bash
# Make sure python3 is available for the Python client tests
# (go test -run PythonClient ./cmd/server/). Installs Debian's python3 only when it is
# missing; the client needs nothing beyond the standard library.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

if command -v python3 >/dev/null 2>&1; then
	echo "python3 present: $(python3 --version 2>&1)"
	exit 0
fi
apt_install python3
echo "installed: $(python3 --version 2>&1)"
