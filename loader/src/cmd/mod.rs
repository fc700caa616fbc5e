//! One module per subcommand: its flags (clap `Args`) and its `run`, returning the exit code.

pub mod compare;
pub mod explain;
pub mod generate;
pub mod load;
pub mod net_census;
pub mod preflight;
pub mod report;
pub mod run;
pub mod run_external;
pub mod trace;
pub mod version;
pub mod wait_drain;

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
