#!/usr/bin/env bash
# Make sure headless Chromium and its WebDriver are installed for the /docs browser test
# (go test -run DocsPageInBrowser ./cmd/server/, which fails instead of skipping when
# CI=true). Installs Debian's chromium and chromium-driver with apt-get only when
# /usr/bin/chromium or /usr/bin/chromedriver is missing. fonts-liberation is named so
# the screenshot has real glyphs even where recommends are off.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver

if [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; then
	echo "chromium present: $("$CHROMEDRIVER" --version 2>/dev/null | head -n1)"
	exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
	echo "$CHROMIUM or $CHROMEDRIVER is missing and apt-get is not available; install Chromium and its chromedriver by other means" >&2
	exit 1
fi

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
	if ! command -v sudo >/dev/null 2>&1; then
		echo "chromium is missing, not running as root, and sudo is not available" >&2
		exit 1
	fi
	SUDO=(sudo -n)
fi

export DEBIAN_FRONTEND=noninteractive
${SUDO[@]+"${SUDO[@]}"} apt-get update -qq
${SUDO[@]+"${SUDO[@]}"} apt-get install -y -qq chromium chromium-driver fonts-liberation >/dev/null

for bin in "$CHROMIUM" "$CHROMEDRIVER"; do
	if [ ! -x "$bin" ]; then
		echo "$bin still missing after installing chromium chromium-driver" >&2
		exit 1
	fi
done
echo "installed: $("$CHROMEDRIVER" --version 2>/dev/null | head -n1)"
