//! `trapdetect explain ID` (and `--list`): what a finding means, from the rule registry, like
//! `rustc --explain`. Printed from the same table the tests hold the code and docs to, so the
//! explanation cannot name an id the code does not emit.

use crate::{
    error::{Error, Result, exit},
    escape,
    traps::registry::{self, Rule},
};

/// Flags of `trapdetect explain`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Exit codes:
  0  explained
  2  no such finding id (or no id given)")]
pub struct ExplainArgs {
    /// Finding id, as in a report (e.g. fs.cwd-slow).
    #[arg(value_name = "ID", required_unless_present = "list")]
    pub id: Option<String>,
    /// List every finding id with its title and the commands that report it.
    #[arg(long, conflicts_with = "id")]
    pub list: bool,
}

/// Prints the explanation (or the list) to stdout.
pub fn run(a: ExplainArgs) -> Result<i32> {
    print!("{}", render(&a)?);
    Ok(exit::OK)
}

/// The text `run` prints.
pub fn render(a: &ExplainArgs) -> Result<String> {
    if a.list {
        return Ok(list());
    }
    let id = a.id.as_deref().unwrap_or_default();
    match registry::lookup(id) {
        Some(r) => Ok(explain(r)),
        None => Err(Error::usage(format!(
            "explain {}: no such finding id (trapdetect explain --list)",
            escape::text(id)
        ))),
    }
}

fn commands(r: &Rule) -> String {
    r.commands
        .iter()
        .map(|c| c.name())
        .collect::<Vec<_>>()
        .join(", ")
}

fn list() -> String {
    let width = registry::ids().map(str::len).max().unwrap_or(0);
    registry::RULES
        .iter()
        .map(|r| format!("{:width$}  {} [{}]\n", r.id, r.title, commands(r)))
        .collect()
}

fn explain(r: &Rule) -> String {
    format!(
        "{id}: {title}\n\nReported by: {cmds}\n\nMechanism:\n  {mech}\n\nEvidence (JSON keys):\n  \
         {ev}\n\nRemedy:\n  {remedy}\n\nSee {doc}.\n",
        id = r.id,
        title = r.title,
        cmds = commands(r),
        mech = r.mechanism,
        ev = r.evidence.join(", "),
        remedy = r.remedy,
        doc = r.doc,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn args(argv: &[&str]) -> ExplainArgs {
        let mut full = vec!["trapdetect", "explain"];
        full.extend(argv);
        match Cli::try_parse_from(full).unwrap().command {
            Some(Command::Explain(a)) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn explains_one_id() {
        let out = render(&args(&["net.fd-limit"])).unwrap();
        assert!(out.starts_with(
            "net.fd-limit: the descriptor limit is below what the run needs\n\n\
             Reported by: preflight, trace, net-census, load, run\n\nMechanism:\n  an open-loop flood"
        ));
        assert!(
            out.contains("\nEvidence (JSON keys):\n  pid, role, in_flight_needed_connections,")
        );
        assert!(out.contains("\nRemedy:\n  `prlimit --pid P --nofile=N:N`"));
        assert!(out.ends_with("\n\nSee docs/net.md.\n"));
    }

    #[test]
    fn lists_every_id_once() {
        let out = render(&args(&["--list"])).unwrap();
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), registry::RULES.len());
        assert_eq!(
            lines[0],
            "cpu.affinity             the server may run on fewer CPUs than the machine has [preflight]"
        );
        for (l, id) in lines.iter().zip(registry::ids()) {
            assert!(l.starts_with(&format!("{id} ")), "{l}");
        }
    }

    #[test]
    fn design_page_shows_the_real_output() {
        let page = include_str!("../../../docs/DESIGN.md");
        // Lines of the real list, then an ellipsis: a new id changes no page but its own.
        let shown = page
            .split("$ trapdetect explain --list\n")
            .nth(1)
            .and_then(|rest| rest.split("…\n```").next())
            .unwrap();
        let real = list();
        assert!(shown.lines().count() >= 3, "{shown}");
        for l in shown.lines() {
            assert!(real.lines().any(|r| r == l), "{l}");
        }
        let one = explain(registry::lookup("host.tracer").unwrap());
        assert!(page.contains(&format!("$ trapdetect explain host.tracer\n{one}$ ")));
    }

    #[test]
    fn unknown_ids_and_bad_usage_are_usage_errors() {
        let e = render(&args(&["cpu.qouta"])).unwrap_err();
        assert_eq!(e.exit_code(), exit::USAGE);
        assert_eq!(
            e.to_string(),
            "explain cpu.qouta: no such finding id (trapdetect explain --list)"
        );
        for argv in [
            vec!["trapdetect", "explain"],
            vec!["trapdetect", "explain", "--list", "fs.cwd-slow"],
        ] {
            assert_eq!(Cli::try_parse_from(&argv).unwrap_err().exit_code(), 2);
        }
    }
}
