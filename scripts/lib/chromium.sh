# Sourced by scripts/test.sh and scripts/test-browser.sh: `need_chromium WHO` checks that the
# Chromium the browser tests drive exists ($CHROMIUM, default Debian's /usr/bin/chromium) and
# exports its path, or says how to get one (WHO prefixes the message) and returns 1.
need_chromium() {
  CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"
  if [[ ! -x "$CHROMIUM" ]]; then
    echo "$1 no Chromium at $CHROMIUM for the browser tests: install Debian's package (apt-get install chromium) or set CHROMIUM" >&2
    return 1
  fi
  export CHROMIUM
}
