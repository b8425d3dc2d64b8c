//! Finds the app's tools, workflows and hooks in `agents/` (see `edgent_build::agents`).

fn main() {
    edgent_build::agents();
}
