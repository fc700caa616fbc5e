//! Builds the eBPF object with aya-build (nightly, `-Z build-std=core`, bpf-linker) so a plain
//! `cargo build` builds everything. `TRAPDETECT_EBPF_OBJ=<file>` uses a prebuilt object instead.
use anyhow::{Context as _, anyhow};

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=TRAPDETECT_EBPF_OBJ");
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").context("OUT_DIR")?);
    if let Some(obj) = std::env::var_os("TRAPDETECT_EBPF_OBJ") {
        let obj = std::path::PathBuf::from(obj);
        println!("cargo:rerun-if-changed={}", obj.display());
        std::fs::copy(&obj, out_dir.join("trapdetect"))
            .with_context(|| format!("copy {}", obj.display()))?;
        return Ok(());
    }
    let metadata = cargo_metadata::MetadataCommand::new()
        .no_deps()
        .exec()
        .context("cargo metadata")?;
    let pkg = metadata
        .packages
        .into_iter()
        .find(|p| p.name.as_str() == "trapdetect-ebpf")
        .ok_or_else(|| anyhow!("package trapdetect-ebpf not found"))?;
    let root = pkg
        .manifest_path
        .parent()
        .ok_or_else(|| anyhow!("no parent for {}", pkg.manifest_path))?;
    aya_build::build_ebpf(
        [aya_build::Package {
            name: pkg.name.as_str(),
            root_dir: root.as_str(),
            ..Default::default()
        }],
        aya_build::Toolchain::default(),
    )
}
