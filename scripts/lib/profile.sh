# Sourced by scripts/build.sh and scripts/test.sh. `release_profile`, run in an app's folder,
# gives its wasm build the release profile edgent's Workers are built and measured with
# (opt-level "z", LTO, one codegen unit, panic abort, symbols kept for wasm-bindgen and
# `EDGENT_KEEP_NAMES`) when the app's workspace root does not set one: a profile is read only
# from the root Cargo.toml, never from a dependency, so an app of its own that copied the
# Cargo.toml of docs/getting-started.md without it would get cargo's defaults (opt-level 3,
# no LTO), whose Worker is about 47% larger gzipped. An app that writes a [profile.release]
# keeps its own, and so does any CARGO_PROFILE_RELEASE_* already in the environment.
release_profile() {
  local manifest
  manifest="$(cargo locate-project --workspace --message-format plain)" || return 1
  grep -Eq '^[[:space:]]*\[profile\.release\][[:space:]]*(#.*)?$' "$manifest" && return 0
  echo "[build] $manifest has no [profile.release]: building with edgent's (opt-level \"z\", LTO, one codegen unit, panic abort; docs/getting-started.md)" >&2
  export CARGO_PROFILE_RELEASE_OPT_LEVEL="${CARGO_PROFILE_RELEASE_OPT_LEVEL:-z}"
  export CARGO_PROFILE_RELEASE_LTO="${CARGO_PROFILE_RELEASE_LTO:-true}"
  export CARGO_PROFILE_RELEASE_CODEGEN_UNITS="${CARGO_PROFILE_RELEASE_CODEGEN_UNITS:-1}"
  export CARGO_PROFILE_RELEASE_PANIC="${CARGO_PROFILE_RELEASE_PANIC:-abort}"
  export CARGO_PROFILE_RELEASE_STRIP="${CARGO_PROFILE_RELEASE_STRIP:-false}"
}
