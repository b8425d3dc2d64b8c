# Sourced by the scripts that install a cargo tool when it is missing (setup.sh: worker-build
# and the wasm-bindgen CLI; fuzz.sh: cargo-fuzz). On a bare machine these compiles are most of
# the first `npm test`, so they are built to compile cheaply:
# - one target dir (target/tools) for all of them: the crates they share build once, and stay
#   for the next version bump;
# - no LTO, 16 codegen units, no debug info, and opt-level 0. The tools only orchestrate
#   (spawn cargo, esbuild, read and write a few files), so unoptimised code costs nothing a
#   build notices; `tool_install --hot CRATE ...` keeps opt-level 1 for the crates a tool spends
#   its run in (the wasm-bindgen CLI parsing and rewriting a 5 MB wasm).
# docs/decisions/2026-12-03-tools-compiled-unoptimised.md has the measurements.
tool_install() {
  local -a hot=()
  while [[ "${1:-}" == "--hot" ]]; do
    hot+=(--config "profile.release.package.$2.opt-level=1")
    shift 2
  done
  CARGO_TARGET_DIR="${EDGENT_TOOLS_TARGET_DIR:-$PWD/target/tools}" \
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo install ${hot[@]+"${hot[@]}"} "$@"
}
