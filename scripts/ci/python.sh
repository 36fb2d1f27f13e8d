#!/usr/bin/env bash
# Make sure python3 is available for the Python client tests
# (go test -run PythonClient ./cmd/server/). Installs Debian's python3 via apt-get only
# when python3 is missing; the client needs nothing beyond the standard library.
set -euo pipefail

if command -v python3 >/dev/null 2>&1; then
	echo "python3 present: $(python3 --version 2>&1)"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "python3 is missing and apt-get is not available; install Python 3.9+ by other means" >&2
	exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "python3 is missing, not running as root, and sudo is not available" >&2
		exit 1
	fi
	SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
${SUDO[@]+"${SUDO[@]}"} apt-get update -qq
${SUDO[@]+"${SUDO[@]}"} apt-get install -y -qq --no-install-recommends python3 >/dev/null
echo "installed: $(python3 --version 2>&1)"
