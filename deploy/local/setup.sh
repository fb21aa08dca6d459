#!/usr/bin/env bash
# The system packages the tests need beyond Python, installed where missing; silent when everything is there, so
# `make test` and `.ci/run` both call it on every run. Debian/Ubuntu (apt-get), as root or through sudo.
#   - a JVM (17+) and Maven: the local Kafka broker runs on the JVM, and Maven fetches its jars once;
#   - Debian's Chromium: the browser tests (tests/browser) drive it through Playwright, whose own browser download does
#     not work here; they look for it at $CTXBUDGET_CHROMIUM (default /usr/bin/chromium);
#   - a CJK font, so the page's Chinese titles show in the browser tests' screenshots;
#   - Node.js and npm: `make test` installs the pinned Claude Code and Codex CLI with npm (tests/realtools/tools.py);
#   - make, for the README's commands, and Python's venv module (Debian ships it apart), for the project's venv.
set -euo pipefail

missing=()
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
command -v mvn >/dev/null 2>&1 || missing+=(maven)
[ -x "${CTXBUDGET_CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium)
dpkg-query -W -f='${Status}' fonts-wqy-zenhei 2>/dev/null | grep -q 'install ok installed' || missing+=(fonts-wqy-zenhei)
command -v npm >/dev/null 2>&1 || missing+=(nodejs npm)
command -v make >/dev/null 2>&1 || missing+=(make)
python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "setup: missing ${missing[*]}; install them as root (apt-get install ${missing[*]})" >&2
  exit 1
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
