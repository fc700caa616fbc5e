//! What this binary is: version, git commit, build date and the hash of the embedded eBPF
//! object, stamped by build.rs, so a binary copied to a benchmark host can be identified.

pub mod kernel;

/// Package version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// Git commit the binary was built from (`unknown` outside a checkout).
pub const GIT_COMMIT: &str = env!("TRAPDETECT_GIT_COMMIT");
/// Build date, `YYYY-MM-DD` UTC (`SOURCE_DATE_EPOCH` when set).
pub const BUILD_DATE: &str = env!("TRAPDETECT_BUILD_DATE");
/// SHA-256 of the embedded eBPF object.
pub const EBPF_SHA256: &str = env!("TRAPDETECT_EBPF_SHA256");

/// What `--version` prints after `trapdetect `.
pub const LONG: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "\ncommit       ",
    env!("TRAPDETECT_GIT_COMMIT"),
    "\nbuilt        ",
    env!("TRAPDETECT_BUILD_DATE"),
    "\neBPF object  sha256:",
    env!("TRAPDETECT_EBPF_SHA256"),
);

/// Helper ids an eBPF object calls: every `call` instruction (opcode 0x85) with source
/// register 0 in its executable sections (a non-zero source marks a bpf-to-bpf or kfunc call).
pub fn helper_calls(elf: &[u8]) -> Vec<u32> {
    let mut ids = std::collections::BTreeSet::new();
    let u16_at = |o: usize| elf.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |o: usize| {
        elf.get(o..o + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    // ELF64 little endian only (what bpfel objects are).
    if elf.get(..6) != Some(&[0x7f, b'E', b'L', b'F', 2, 1][..]) {
        return vec![];
    }
    let (Some(shoff), Some(shentsize), Some(shnum)) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c))
    else {
        return vec![];
    };
    for i in 0..usize::from(shnum) {
        let sh = shoff as usize + i * usize::from(shentsize);
        let (Some(flags), Some(off), Some(size)) =
            (u64_at(sh + 8), u64_at(sh + 24), u64_at(sh + 32))
        else {
            continue;
        };
        const SHF_EXECINSTR: u64 = 4;
        if flags & SHF_EXECINSTR == 0 {
            continue;
        }
        let Some(code) = elf.get(off as usize..(off + size) as usize) else {
            continue;
        };
        for insn in code.chunks_exact(8) {
            if insn[0] == 0x85 && insn[1] >> 4 == 0 {
                ids.insert(u32::from_le_bytes([insn[4], insn[5], insn[6], insn[7]]));
            }
        }
    }
    ids.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_commit_date_and_object_hash() {
        assert_eq!(EBPF_SHA256.len(), 64);
        assert!(EBPF_SHA256.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(GIT_COMMIT == "unknown" || GIT_COMMIT.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_eq!(BUILD_DATE.len(), 10);
        assert!(LONG.starts_with(VERSION));
    }

    #[test]
    fn the_embedded_object_calls_helpers() {
        let ids = helper_calls(crate::probe::object());
        assert!(!ids.is_empty());
    }
}
