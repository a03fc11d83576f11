# Sourced by test.sh: the system packages the tests need. Installed with apt-get when missing
# (as root on Debian/Ubuntu); elsewhere it says what to install and stops.
missing=()
python3 -c "import venv, ensurepip" 2>/dev/null || missing+=(python3-venv)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)  # tests start their own server
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)  # it creates the tests' Redis Cluster
# the browser tests drive the distribution's Chromium (Playwright is told where it is; no downloads)
{ command -v chromium || command -v chromium-browser || [ -n "${WORKBENCH_CHROMIUM:-}" ]; } >/dev/null 2>&1 \
  || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq "${missing[@]}"
  else
    echo "error: the tests need these system packages: ${missing[*]} (install them, then rerun)" >&2
    exit 2
  fi
fi
