//! `trapdetect generate` (hidden): writes the man pages and shell completions from the one CLI
//! definition in `cli.rs`, so packaging (`cargo xtask dist`) never carries a hand-written copy
//! that drifts. Every visible subcommand gets its page without anyone listing it here. The
//! definition is passed in (`Cli::command()`), so this module does not import the CLI that
//! imports it; the tests of the definition itself are in `cli_checks.rs`.

use std::path::{Path, PathBuf};

use clap_complete::Shell;

use crate::error::{Error, Result, exit};

/// Flags of `trapdetect generate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Exit codes:
  0  written
  2  a directory could not be created or written")]
pub struct GenerateArgs {
    /// Write trapdetect.1 and one trapdetect-<subcommand>.1 per visible subcommand here.
    #[arg(long, value_name = "DIR")]
    pub man_dir: Option<PathBuf>,
    /// Write the bash (trapdetect), zsh (_trapdetect) and fish (trapdetect.fish) completions here.
    #[arg(long, value_name = "DIR")]
    pub completions_dir: Option<PathBuf>,
}

/// The file names `write_man_pages` produces: `trapdetect.1` and `trapdetect-<sub>.1` for every
/// subcommand not hidden, in definition order.
pub fn man_page_names(root: &clap::Command) -> Vec<String> {
    let mut cmd = root.clone().disable_help_subcommand(true);
    cmd.build();
    let mut names = vec!["trapdetect.1".to_string()];
    names.extend(
        cmd.get_subcommands()
            .filter(|s| !s.is_hide_set())
            .map(|s| format!("trapdetect-{}.1", s.get_name())),
    );
    names
}

fn io_err(what: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Input {
        what: format!("write {}", what.display()),
        source,
    }
}

/// Writes one man page per visible (sub)command into `dir`; returns the paths written.
pub fn write_man_pages(root: &clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut root = root.clone().disable_help_subcommand(true);
    root.build();
    let date = crate::version::BUILD_DATE;
    let mut written = vec![];
    let mut pages = vec![root.clone()];
    pages.extend(root.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    for cmd in pages {
        let man = clap_mangen::Man::new(cmd)
            .date(date)
            .source(format!("trapdetect {}", env!("CARGO_PKG_VERSION")))
            .manual("trapdetect manual");
        let path = dir.join(man.get_filename());
        let mut buf = vec![];
        man.render(&mut buf).map_err(io_err(&path))?;
        std::fs::write(&path, buf).map_err(io_err(&path))?;
        written.push(path);
    }
    Ok(written)
}

/// Writes the bash, zsh and fish completions into `dir`; returns the paths written.
pub fn write_completions(root: &clap::Command, dir: &Path) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(io_err(dir))?;
    let mut written = vec![];
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        let mut cmd = root.clone();
        let path =
            clap_complete::generate_to(shell, &mut cmd, "trapdetect", dir).map_err(io_err(dir))?;
        written.push(path);
    }
    Ok(written)
}

/// Runs the command for the CLI definition `root`; returns the exit code.
pub fn run(a: GenerateArgs, root: clap::Command) -> Result<i32> {
    if a.man_dir.is_none() && a.completions_dir.is_none() {
        return Err(Error::usage(
            "nothing to generate: give --man-dir DIR and/or --completions-dir DIR",
        ));
    }
    let mut written = vec![];
    if let Some(d) = &a.man_dir {
        written.extend(write_man_pages(&root, d)?);
    }
    if let Some(d) = &a.completions_dir {
        written.extend(write_completions(&root, d)?);
    }
    for p in written {
        println!("{}", p.display());
    }
    Ok(exit::OK)
}
