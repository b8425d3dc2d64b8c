//! Finds the fixture's workflows in `agents/`.

fn main() {
    edgent_build::agents();
}
