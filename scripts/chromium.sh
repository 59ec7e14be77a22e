#!/usr/bin/env bash
# Installs Debian's Chromium for the console's browser tests (tests/console/test_browser.py)
# when it is missing. Playwright drives it at /usr/bin/chromium; Playwright's own browser
# download is never run (it fetches a browser build and fails here). Without root the tests
# skip, saying why.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" != 0 ]; then
  echo "chromium: /usr/bin/chromium is missing and this is not root: the browser tests will skip" >&2
  exit 0
fi
echo "installing chromium (Debian's package) for the browser tests"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq chromium >/dev/null
