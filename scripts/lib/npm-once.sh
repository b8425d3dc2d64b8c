# Sourced by the scripts that install a package set of their own (setup.sh, test.sh, ui.sh,
# test-browser.sh): `npm_once DIR PROBE` runs `npm ci` in DIR unless DIR/PROBE exists and
# DIR/node_modules was installed from the same package-lock.json (its hash, kept in
# node_modules/.edgent-lock; scripts/clients.mjs checks the same stamp for clients/js).
npm_once() {
  # Every failure returns at once: a caller may run this where `set -e` does not apply (in an
  # `||` list), and a stamp written after a failed install would make later runs skip it.
  local dir="$1" probe="$2" hash
  hash="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)" || return 1
  if [[ -e "$dir/$probe" && "$(cat "$dir/node_modules/.edgent-lock" 2>/dev/null)" == "$hash" ]]; then
    return 0
  fi
  echo "[npm] installing the packages of ${dir/#./the project} (npm ci, once per lockfile)"
  npm ci --prefix "$dir" --no-audit --no-fund || return 1
  echo "$hash" >"$dir/node_modules/.edgent-lock" || return 1
}
