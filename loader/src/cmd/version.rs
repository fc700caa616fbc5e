//! `trapdetect version [--kernel]`: what this binary is and, with `--kernel`, whether this
//! kernel has what `trace` needs (BTF and the struct fields read through it, every tracepoint
//! of the compatibility table, the eBPF helpers and map types the object uses), checked the
//! way `trace` would use them, before a benchmark depends on it.

use serde_json::json;

use crate::{
    error::{Result, exit},
    util::print,
    version::{
        self,
        kernel::{Check, kernel_checks, kernel_shown},
    },
};

/// Flags of `trapdetect version`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0  printed (with --kernel: everything `trace` requires is present)
  2  bad usage
  4  with --kernel: something `trace` requires is missing (named)")]
pub struct VersionArgs {
    /// Also check this kernel's support: BTF, tracepoints, eBPF helpers and map types (the
    /// helper and map probes load tiny programs: they need root or CAP_BPF).
    #[arg(long)]
    pub kernel: bool,
    /// Kernel BTF to check instead of /sys/kernel/btf/vmlinux (as `trace --btf`).
    #[arg(long, value_name = "FILE", requires = "kernel")]
    pub btf: Option<std::path::PathBuf>,
    /// Print JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command; returns the exit code.
pub fn run(a: VersionArgs) -> Result<i32> {
    let mut doc = json!({
        "schema": "trapdetect.version/1",
        "version": version::VERSION,
        "commit": version::GIT_COMMIT,
        "build_date": version::BUILD_DATE,
        "ebpf_sha256": version::EBPF_SHA256,
    });
    let mut text = format!("trapdetect {}\n", version::LONG);
    let mut code = exit::OK;
    if a.kernel {
        let groups = kernel_checks(a.btf.as_deref());
        let missing: Vec<&str> = groups
            .iter()
            .flat_map(|(_, c)| c)
            .filter(|c| c.required && c.ok == Some(false))
            .map(|c| c.what.as_str())
            .collect();
        let unchecked = groups
            .iter()
            .flat_map(|(_, c)| c)
            .filter(|c| c.ok.is_none())
            .count();
        text.push_str(&format!("kernel       {}\n", kernel_shown()));
        for (name, checks) in &groups {
            text.push_str(&format!("{name}:\n"));
            for c in checks {
                let status = match (c.ok, c.required) {
                    (Some(true), _) => "ok",
                    (Some(false), true) => "MISSING",
                    (Some(false), false) => "missing",
                    (None, _) => "NOT CHECKED",
                };
                let sep = if c.note.is_empty() { "" } else { "  " };
                text.push_str(&format!(
                    "  {status:<11} {}{}{sep}{}\n",
                    c.what,
                    if c.required { "" } else { " (optional)" },
                    c.note
                ));
            }
        }
        let verdict = if !missing.is_empty() {
            code = exit::PRIVILEGE;
            format!("trace cannot run here: missing {}", missing.join(", "))
        } else if unchecked > 0 {
            format!(
                "nothing required is missing, but {unchecked} checks could not run (see NOT CHECKED)"
            )
        } else {
            "everything trace requires is present".into()
        };
        text.push_str(&format!("verdict: {verdict}\n"));
        doc["kernel"] = json!({
            "release": kernel_shown(),
            "groups": groups.iter().map(|(n, c)| json!({"name": n, "checks": c.iter().map(Check::json).collect::<Vec<_>>()})).collect::<Vec<_>>(),
            "missing_required": missing,
            "not_checked": unchecked,
            "verdict": verdict,
        });
    }
    if a.json {
        print(&format!("{doc:#}\n"))?;
    } else {
        print(&text)?;
    }
    Ok(code)
}
