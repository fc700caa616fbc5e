//! Rebuild when bpf-linker changes (it links the object).
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
