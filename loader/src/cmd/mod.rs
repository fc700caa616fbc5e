//! One module per subcommand: its flags (clap `Args`) and its `run`, returning the exit code.

pub mod compare;
pub mod generate;
pub mod load;
pub mod net_census;
pub mod preflight;
pub mod report;
pub mod trace;
pub mod version;
pub mod wait_drain;

/// Finding ids of the load generator's own rules (`load`, and `trace --url`).
pub const GEN_IDS: &[&str] = &[
    "gen.closed-loop",
    "gen.lag",
    "load.ceiling",
    "load.errors",
    "load.refusal",
    "load.status-mix",
];

/// Refuses an `--ignore` of an id no rule reports (exit 2, listing the valid ones): a typo
/// would otherwise silence nothing and pass unnoticed.
pub fn check_ignore(ids: &[String]) -> crate::error::Result<()> {
    let mut known: Vec<&str> = preflight::IDS
        .iter()
        .chain(crate::traps::net::IDS)
        .chain(GEN_IDS)
        .copied()
        .collect();
    known.sort_unstable();
    known.dedup();
    match ids.iter().find(|i| !known.contains(&i.as_str())) {
        None => Ok(()),
        Some(bad) => Err(crate::error::Error::usage(format!(
            "--ignore {}: no such finding id (known: {})",
            crate::escape::text(bad),
            known.join(", ")
        ))),
    }
}
