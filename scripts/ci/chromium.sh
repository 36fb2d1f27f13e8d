#!/usr/bin/env bash
# Make sure headless Chromium and its WebDriver are installed for the /docs and /explore
# browser tests (go test -run 'DocsPageInBrowser|ExplorerInBrowser' ./cmd/shardplan-server/, which
# fail instead of skipping when CI=true). Installs Debian's chromium and chromium-driver
# only when /usr/bin/chromium or /usr/bin/chromedriver is missing. fonts-liberation is
# named so the screenshots have real glyphs with recommends off.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver

if [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; then
	echo "chromium present: $("$CHROMEDRIVER" --version 2>/dev/null | head -n1)"
	exit 0
fi
apt_install chromium chromium-driver fonts-liberation
for bin in "$CHROMIUM" "$CHROMEDRIVER"; do
	if [ ! -x "$bin" ]; then
		echo "$bin still missing after installing chromium chromium-driver" >&2
		exit 1
	fi
done
echo "installed: $("$CHROMEDRIVER" --version 2>/dev/null | head -n1)"
