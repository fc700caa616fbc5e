//! One module per subcommand: its flags (clap `Args`) and its `run`, returning the exit code.

pub mod agent;
pub mod compare;
pub mod explain;
pub mod generate;
pub mod load;
pub mod net_census;
pub mod preflight;
pub mod report;
pub mod run;
pub mod trace;
pub mod version;
pub mod wait_drain;

/// The output flags of every command that writes a report: one definition, flattened into
/// each (`trace`, `preflight`, `load`, and `run` through `load`'s flags).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct OutputArgs {
    /// Print the report as JSON on stdout instead of text.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to FILE.
    #[arg(long, value_name = "FILE")]
    pub json_out: Option<std::path::PathBuf>,
    /// Also write the report as a self-contained HTML page (charts included) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<std::path::PathBuf>,
    /// CSV, OpenMetrics and .hgrm exports.
    #[command(flatten)]
    pub export: crate::report::export::ExportArgs,
}

/// The server named instead of given by pid: one definition, flattened into `trace`, `run`
/// and `preflight` (host/target.rs resolves it to the root of one process tree).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SelectArgs {
    /// The server by process name (its comm, as `ps -o comm` shows, 15 bytes at most): the root
    /// of its tree (nginx's master, php-fpm's); several separate trees are refused.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "cgroup", "container", "unit"])]
    pub comm: Option<String>,
    /// The server by cgroup: its path as /proc/PID/cgroup shows it
    /// (`/system.slice/nginx.service`) or its directory under /sys/fs/cgroup; its oldest
    /// process tree is traced.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["pid", "container", "unit"])]
    pub cgroup: Option<String>,
    /// The server by container: an id or a unique prefix of one (Docker, containerd, CRI-O,
    /// Podman; matched through /proc/PID/cgroup), or a Docker or Podman container name.
    #[arg(long, value_name = "ID|NAME", conflicts_with_all = ["pid", "unit"])]
    pub container: Option<String>,
    /// The server by systemd unit (`nginx` means `nginx.service`).
    #[arg(long, value_name = "NAME", conflicts_with = "pid")]
    pub unit: Option<String>,
}

impl SelectArgs {
    /// What was named, if anything.
    pub fn selector(&self) -> Option<crate::host::target::Selector> {
        use crate::host::target::Selector;
        self.comm
            .clone()
            .map(Selector::Comm)
            .or_else(|| self.cgroup.clone().map(Selector::Cgroup))
            .or_else(|| self.container.clone().map(Selector::Container))
            .or_else(|| self.unit.clone().map(Selector::Unit))
    }

    /// The pid to trace: `--pid` as given, else the root the selector names (said on stderr
    /// and returned for the report), else none. A selector that names nothing, or several
    /// separate servers, is a usage error (exit 2).
    pub fn resolve(&self, pid: Option<u32>) -> crate::error::Result<(Option<u32>, Option<String>)> {
        let found = self.find(pid)?;
        if let Some(how) = &found.1 {
            eprintln!("trapdetect: {how}");
        }
        Ok(found)
    }

    /// [`SelectArgs::resolve`] without the line on stderr (the agent finds its target before
    /// every window and says its own line).
    pub fn find(&self, pid: Option<u32>) -> crate::error::Result<(Option<u32>, Option<String>)> {
        let Some(sel) = self.selector() else {
            return Ok((pid, None));
        };
        let r = crate::host::target::resolve(&sel).map_err(crate::error::Error::usage)?;
        Ok((Some(r.pid), Some(r.how)))
    }
}

/// The flags that turn findings into an exit code, for every command that judges.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct VerdictArgs {
    /// Silence a finding by id (it is still listed as ignored). Repeatable.
    #[arg(long, value_name = "ID")]
    pub ignore: Vec<String>,
    /// Treat warnings as failures for the exit code.
    #[arg(long)]
    pub strict: bool,
}

/// Refuses an `--ignore` of an id no rule reports (exit 2, listing the valid ones): a typo
/// would otherwise silence nothing and pass unnoticed. Ids come from the rule registry.
pub fn check_ignore(ids: &[String]) -> crate::error::Result<()> {
    let known: Vec<&str> = crate::traps::registry::ids().collect();
    match ids.iter().find(|i| !known.contains(&i.as_str())) {
        None => Ok(()),
        Some(bad) => Err(crate::error::Error::usage(format!(
            "--ignore {}: no such finding id (known: {})",
            crate::escape::text(bad),
            known.join(", ")
        ))),
    }
}

/// The schemas `report` re-renders (prefixes, any version).
const RENDERED: [&str; 6] = [
    "trapdetect.report/",
    "trapdetect.load/",
    "trapdetect.merged-load/",
    "trapdetect.load-steps/",
    "trapdetect.compare/",
    "trapdetect.wait-drain/",
];

/// Reads and checks a saved trapdetect JSON document.
pub fn read_saved(path: &std::path::Path) -> crate::error::Result<serde_json::Value> {
    let body = std::fs::read(path)
        .map_err(|e| crate::error::Error::input(format!("read {}", path.display()), e))?;
    let doc: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| crate::error::Error::usage(format!("{}: not JSON ({e})", path.display())))?;
    match doc["schema"].as_str() {
        Some(s) if RENDERED.iter().any(|k| s.starts_with(k)) => Ok(doc),
        Some(s) => Err(crate::error::Error::usage(format!(
            "{}: unknown schema {:?} (expected one of trapdetect.report/1, load/1, merged-load/1, load-steps/1, compare/1, wait-drain/1)",
            path.display(),
            crate::escape::text(s)
        ))),
        None => Err(crate::error::Error::usage(format!(
            "{}: not a trapdetect report (no \"schema\" field)",
            path.display()
        ))),
    }
}
