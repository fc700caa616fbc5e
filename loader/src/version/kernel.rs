//! `trapdetect version --kernel` below its command: whether this kernel has what `trace` needs
//! (BTF and the struct fields read through it, every tracepoint of the compatibility table, the
//! eBPF helpers and map types the object uses), checked the way `trace` would use them.

use aya::{
    maps::MapType,
    programs::ProgramType,
    sys::{BpfHelper, is_helper_supported, is_map_supported},
};
use serde_json::{Value, json};

use crate::{
    btf::Btf,
    probe::{self, tracefs::Tracefs},
    version,
};

/// Helpers only optional programs call: (helper, name, the kernel that has it, the program
/// type that calls it, which programs, what their absence costs). The off-CPU probes of
/// `trapdetect run` (tp_btf) degrade `run`'s classes without theirs; the FUSE latency probe
/// (whose tracepoint came in 6.13) leaves `fs.serialized` to the flat-rate rule. Never `trace`.
const OPTIONAL_HELPERS: &[(BpfHelper, &str, &str, ProgramType, &str, &str)] = &[
    (
        BpfHelper::BPF_FUNC_task_pt_regs,
        "task_pt_regs",
        "5.15",
        ProgramType::Tracing,
        "tp_btf programs, `run` only",
        "`run` cannot say why threads wait",
    ),
    (
        BpfHelper::BPF_FUNC_get_current_task_btf,
        "get_current_task_btf",
        "5.11",
        ProgramType::Tracing,
        "tp_btf programs, `run` only",
        "`run` cannot say why threads wait",
    ),
    (
        BpfHelper::BPF_FUNC_map_lookup_percpu_elem,
        "map_lookup_percpu_elem",
        "5.19",
        ProgramType::TracePoint,
        "the FUSE request timing, with fuse_request_send",
        "FUSE requests are not timed by the requests ahead",
    ),
];

/// Every helper the eBPF object may call, with the kernel that introduced it. A unit test
/// checks that the object calls nothing missing from this list or the one above.
const HELPERS: &[(BpfHelper, &str, &str)] = &[
    (
        BpfHelper::BPF_FUNC_map_lookup_elem,
        "map_lookup_elem",
        "3.19",
    ),
    (
        BpfHelper::BPF_FUNC_map_update_elem,
        "map_update_elem",
        "3.19",
    ),
    (
        BpfHelper::BPF_FUNC_map_delete_elem,
        "map_delete_elem",
        "3.19",
    ),
    (BpfHelper::BPF_FUNC_ktime_get_ns, "ktime_get_ns", "4.1"),
    (
        BpfHelper::BPF_FUNC_probe_read_user,
        "probe_read_user",
        "5.5",
    ),
    (
        BpfHelper::BPF_FUNC_get_current_pid_tgid,
        "get_current_pid_tgid",
        "4.2",
    ),
    (
        BpfHelper::BPF_FUNC_get_current_task,
        "get_current_task",
        "4.8",
    ),
    (
        BpfHelper::BPF_FUNC_probe_read_kernel,
        "probe_read_kernel",
        "5.5",
    ),
    (
        BpfHelper::BPF_FUNC_probe_read_user_str,
        "probe_read_user_str",
        "5.5",
    ),
    (BpfHelper::BPF_FUNC_ringbuf_output, "ringbuf_output", "5.8"),
    (
        BpfHelper::BPF_FUNC_ringbuf_reserve,
        "ringbuf_reserve",
        "5.8",
    ),
    (BpfHelper::BPF_FUNC_ringbuf_submit, "ringbuf_submit", "5.8"),
    (
        BpfHelper::BPF_FUNC_ringbuf_discard,
        "ringbuf_discard",
        "5.8",
    ),
];

/// The map types the object declares, with the kernel that introduced them.
const MAPS: &[(MapType, &str, &str)] = &[
    (MapType::Array, "array", "3.19"),
    (MapType::PerCpuArray, "percpu_array", "4.6"),
    (MapType::PerCpuHash, "percpu_hash", "4.6"),
    (MapType::RingBuf, "ringbuf", "5.8"),
];

/// One line of the kernel report.
pub struct Check {
    /// What is checked.
    pub what: String,
    /// `trace` needs it.
    pub required: bool,
    /// `Some(true)` present, `Some(false)` missing, `None` not checked (why in `note`).
    pub ok: Option<bool>,
    /// Why it is missing or not checked.
    pub note: String,
}

impl Check {
    /// The check as the JSON of `version --kernel --json`.
    pub fn json(&self) -> Value {
        json!({
            "what": self.what,
            "required": self.required,
            "status": match self.ok { Some(true) => "ok", Some(false) => "missing", None => "not-checked" },
            "note": self.note,
        })
    }
}

/// The kernel release as printed (escaped; `unknown` when unreadable).
pub fn kernel_shown() -> String {
    match crate::util::kernel_release(std::path::Path::new("/")) {
        r if r.is_empty() => "unknown".into(),
        r => crate::escape::text(&r),
    }
}

/// Probes this kernel; returns the checks in report order, grouped.
pub fn kernel_checks(btf_file: Option<&std::path::Path>) -> Vec<(&'static str, Vec<Check>)> {
    vec![
        ("BTF", btf_checks(btf_file)),
        ("tracepoints", tracepoint_checks()),
        ("eBPF helpers", helper_checks()),
        ("eBPF map types", map_checks()),
    ]
}

/// BTF, and the fields read through it.
fn btf_checks(btf_file: Option<&std::path::Path>) -> Vec<Check> {
    let path = btf_file.unwrap_or(std::path::Path::new("/sys/kernel/btf/vmlinux"));
    let mut btf_checks = vec![];
    match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|d| {
            Btf::parse(&d)
                .map_err(|e| e.to_string())
                .map(|b| (b, d.len()))
        }) {
        Ok((btf, len)) => {
            btf_checks.push(Check {
                what: path.display().to_string(),
                required: true,
                ok: Some(true),
                note: format!("{len} bytes"),
            });
            for (what, required, r) in probe::btf_fields(&btf) {
                btf_checks.push(Check {
                    what: what.into(),
                    required,
                    ok: Some(r.is_ok()),
                    note: r.err().unwrap_or_default(),
                });
            }
        }
        Err(e) => btf_checks.push(Check {
            what: path.display().to_string(),
            required: true,
            ok: Some(false),
            note: format!("{e} (needs CONFIG_DEBUG_INFO_BTF=y, or a BTF file with --btf)"),
        }),
    }
    btf_checks
}

/// Tracepoints, from the compatibility table `trace` attaches by.
fn tracepoint_checks() -> Vec<Check> {
    let mut tp = vec![];
    match Tracefs::ensure() {
        Ok(fs) => {
            for row in probe::compat_table() {
                for (cat, name) in &row.attach {
                    // A part of the syscall dispatch is checked with the program it is in.
                    let Some((system, event)) = probe::tracefs_event(cat, name) else {
                        continue;
                    };
                    let ok = fs.has_event(system, event);
                    tp.push(Check {
                        what: format!("{cat}/{name}"),
                        required: row.required,
                        ok: Some(ok),
                        note: if ok {
                            String::new()
                        } else {
                            row.purpose.to_string()
                        },
                    });
                }
            }
        }
        Err(e) => tp.push(Check {
            what: "tracefs".into(),
            required: true,
            ok: None,
            note: e.to_string(),
        }),
    }
    tp
}

/// Helpers: probed by loading two-instruction programs (needs CAP_BPF).
fn helper_checks() -> Vec<Check> {
    let used = version::helper_calls(probe::object());
    let mut helpers = vec![];
    for id in &used {
        if let Some((h, name, since, ty, from, without)) =
            OPTIONAL_HELPERS.iter().find(|(h, ..)| *h as u32 == *id)
        {
            let r = is_helper_supported(*ty, *h);
            helpers.push(Check {
                what: format!("bpf_{name} (from {from})"),
                required: false,
                ok: r.as_ref().ok().copied(),
                note: match r {
                    Ok(true) => String::new(),
                    Ok(false) => format!("Linux {since}+; without it {without}"),
                    Err(e) => format!("not probed: {e}"),
                },
            });
            continue;
        }
        let Some((h, name, since)) = HELPERS.iter().find(|(h, ..)| *h as u32 == *id) else {
            helpers.push(Check {
                what: format!("helper #{id}"),
                required: true,
                ok: None,
                note: "not in trapdetect's helper table".into(),
            });
            continue;
        };
        let r = is_helper_supported(ProgramType::TracePoint, *h);
        helpers.push(Check {
            what: format!("bpf_{name} (from tracepoint programs)"),
            required: true,
            ok: r.as_ref().ok().copied(),
            note: match r {
                Ok(true) => String::new(),
                Ok(false) => format!("Linux {since}+"),
                Err(e) => format!("not probed: {e} (needs root or CAP_BPF)"),
            },
        });
    }
    helpers
}

/// Map types: probed the same way.
fn map_checks() -> Vec<Check> {
    let mut maps = vec![];
    for (m, name, since) in MAPS {
        let r = is_map_supported(*m);
        maps.push(Check {
            what: (*name).into(),
            required: true,
            ok: r.as_ref().ok().copied(),
            note: match r {
                Ok(true) => String::new(),
                Ok(false) => format!("Linux {since}+"),
                Err(e) => format!("not probed: {e} (needs root or CAP_BPF)"),
            },
        });
    }
    maps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_helper_the_object_calls_is_in_the_table() {
        let used = version::helper_calls(probe::object());
        for id in &used {
            assert!(
                HELPERS.iter().any(|(h, ..)| *h as u32 == *id)
                    || OPTIONAL_HELPERS.iter().any(|(h, ..)| *h as u32 == *id),
                "the eBPF object calls helper #{id}: add it to HELPERS with its kernel version"
            );
        }
        assert!(used.contains(&(BpfHelper::BPF_FUNC_ringbuf_reserve as u32)));
    }
}
