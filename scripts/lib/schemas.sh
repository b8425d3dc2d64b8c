# Sourced by scripts/build.sh and scripts/test.sh. `write_schemas`, run in an app's folder,
# prints the path of the app's JSON Schemas file for its next wasm build (EDGENT_SCHEMAS), or
# nothing when the app generates its schemas in the Worker. An app whose Cargo.toml turns on
# edgent's `prebuilt-schemas` feature gets them from its host test `edgent_export_schemas`
# (`edgent::export_schemas!` in src/lib.rs), run here. When EDGENT_SCHEMAS_DIR names a folder
# the caller filled from this checkout moments ago (scripts/test.sh: its `cargo test --workspace`
# writes every app's file there), the app's file is taken from it instead, unless one of the
# app's sources changed since. The export runs without EDGENT_SCHEMAS, and the file is replaced
# only when its content changed (so an unchanged app is not compiled again).
write_schemas() {
  # The feature named in a dependency's `features` (not in a comment).
  grep -Eq '^[^#]*"prebuilt-schemas"' Cargo.toml || return 0
  local manifest target name file log
  name="$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
  # Taken only while no source of the app is newer than it.
  file="${EDGENT_SCHEMAS_DIR:+$EDGENT_SCHEMAS_DIR/$name.schemas.json}"
  if [[ -n "$file" && -s "$file" ]] && ! newer_source "$file"; then
    echo "$(cd "$(dirname "$file")" && pwd)/$(basename "$file")"
    return 0
  fi
  manifest="$(cargo locate-project --workspace --message-format plain)" || return 1
  target="${CARGO_TARGET_DIR:-$(dirname "$manifest")/target}"
  mkdir -p "$target/edgent" || return 1
  # Absolute: the wasm build includes the file from its own folder.
  target="$(cd "$target" && pwd)"
  file="$target/edgent/$name.schemas.json"
  log="$target/edgent/$name.schemas.log"
  rm -f "$file.new"
  # Without EDGENT_SCHEMAS: the export is a host build, which must not be handed an old file.
  if ! env -u EDGENT_SCHEMAS EDGENT_SCHEMAS_OUT="$file.new" \
      cargo test --lib --quiet edgent_export_schemas -- --exact >"$log" 2>&1; then
    cat "$log" >&2
    echo "[build] the app's JSON Schemas could not be written (its host test edgent_export_schemas, above)" >&2
    return 1
  fi
  if [[ ! -s "$file.new" ]]; then
    echo "[build] $name turns on edgent's prebuilt-schemas but its test edgent_export_schemas wrote nothing: add \`edgent::export_schemas!(YOUR_CATALOG);\` at the root of src/lib.rs (docs/tools.md)" >&2
    return 1
  fi
  # Replaced only when it changed: the wasm build includes it, so a new copy of the same
  # schemas would make cargo compile and link the app again for nothing.
  if cmp -s "$file.new" "$file"; then rm -f "$file.new"; else mv -f "$file.new" "$file"; fi
  echo "$file"
}

# Whether a file of the app's own sources (agents/, src/, Cargo.toml, build.rs) is newer than $1.
newer_source() {
  local found
  found="$(find agents src Cargo.toml build.rs -newer "$1" -print -quit 2>/dev/null)"
  [[ -n "$found" ]]
}
