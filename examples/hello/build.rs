//! Finds the app's tools, workflows and hooks in `agents/`.

fn main() {
    edgent_build::agents();
}
