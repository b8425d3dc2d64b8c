# Sourced by scripts/build.sh and scripts/test.sh. `write_schemas`, run in an app's folder,
# prints the path of the app's JSON Schemas file for its next wasm build (EDGENT_SCHEMAS), or
# nothing when the app generates its schemas in the Worker. An app whose Cargo.toml turns on
# edgent's `prebuilt-schemas` feature gets them from its host test `edgent_export_schemas`
# (`edgent::export_schemas!` in src/lib.rs), run here. When EDGENT_SCHEMAS_DIR names a folder
# the caller filled from this checkout moments ago (scripts/test.sh: its `cargo test --workspace`
# writes every app's file there), the app's file is taken from it instead.
write_schemas() {
  # The feature named in a dependency's `features` (not in a comment).
  grep -Eq '^[^#]*"prebuilt-schemas"' Cargo.toml || return 0
  local manifest target name file log
  name="$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
  if [[ -n "${EDGENT_SCHEMAS_DIR:-}" && -s "$EDGENT_SCHEMAS_DIR/$name.schemas.json" ]]; then
    echo "$EDGENT_SCHEMAS_DIR/$name.schemas.json"
    return 0
  fi
  manifest="$(cargo locate-project --workspace --message-format plain)" || return 1
  target="${CARGO_TARGET_DIR:-$(dirname "$manifest")/target}"
  file="$target/edgent/$name.schemas.json"
  log="$target/edgent/$name.schemas.log"
  mkdir -p "$target/edgent" || return 1
  rm -f "$file"
  if ! EDGENT_SCHEMAS_OUT="$file" cargo test --lib --quiet edgent_export_schemas -- --exact >"$log" 2>&1; then
    cat "$log" >&2
    echo "[build] the app's JSON Schemas could not be written (its host test edgent_export_schemas, above)" >&2
    return 1
  fi
  if [[ ! -s "$file" ]]; then
    echo "[build] $name turns on edgent's prebuilt-schemas but its test edgent_export_schemas wrote nothing: add \`edgent::export_schemas!(YOUR_CATALOG);\` to src/lib.rs (docs/tools.md)" >&2
    return 1
  fi
  echo "$file"
}
