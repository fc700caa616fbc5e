//! The `fingerprint` section (issue 23): the environment a report was measured in, carried by
//! preflight, trace and run reports; `compare` names the fields that differ.

use super::Section;
use crate::host::fingerprint::Fingerprint;

/// The `fingerprint` section: what the run's numbers depend on (compared by `compare`).
impl Section for Fingerprint {
    fn name(&self) -> &'static str {
        "fingerprint"
    }
    fn json(&self) -> std::result::Result<serde_json::Value, String> {
        super::section::to_json(self)
    }
    fn text(&self) -> String {
        let f = self;
        format!(
            "  kernel {}; {} × {}; governors {}; turbo {}; SMT {}; THP {}; NUMA balancing {}; {}\n",
            f.kernel,
            f.cpus_online,
            f.cpu_model,
            if f.governors.is_empty() {
                "-".into()
            } else {
                f.governors.join(",")
            },
            f.turbo.map(|t| if t { "on" } else { "off" }).unwrap_or("?"),
            f.smt.as_deref().unwrap_or("?"),
            f.thp.as_deref().unwrap_or("?"),
            f.numa_balancing.as_deref().unwrap_or("?"),
            f.virt
        )
    }
}
