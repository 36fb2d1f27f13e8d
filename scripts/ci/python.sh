#!/usr/bin/env bash
# Make sure python3 and pip are available for the Python client tests
# (go test -run PythonClient ./cmd/shardplan-server/). Installs Debian's python3 and python3-pip only
# when missing; the client needs nothing beyond the standard library (pip is there for the
# test that installs it without a package index).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

if command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
	echo "python3 present: $(python3 --version 2>&1), $(python3 -m pip --version 2>&1 | cut -d' ' -f1-2)"
	exit 0
fi
apt_install python3 python3-pip
echo "installed: $(python3 --version 2>&1)"
