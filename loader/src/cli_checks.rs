//! Tests of the one CLI definition (`cli.rs`): the man pages and completions `generate` writes
//! from it, one help style across commands, docs/ synopses that match it, and `load`'s flags
//! with the plan they build.

mod generate {
    use clap::CommandFactory;

    use crate::{
        cli::Cli,
        cmd::generate::{man_page_names, write_completions, write_man_pages},
    };

    #[test]
    fn every_visible_subcommand_gets_a_man_page_and_completions_cover_them() {
        let dir = std::env::temp_dir().join(format!("trapdetect-gen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pages = write_man_pages(&Cli::command(), &dir.join("man")).unwrap();
        let names: Vec<String> = pages
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, man_page_names(&Cli::command()));
        for want in [
            "trapdetect.1",
            "trapdetect-trace.1",
            "trapdetect-load.1",
            "trapdetect-preflight.1",
            "trapdetect-wait-drain.1",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{want} missing from {names:?}"
            );
        }
        // Hidden plumbing stays out of the manual.
        assert!(
            !names
                .iter()
                .any(|n| n.contains("net-census") || n.contains("generate"))
        );
        let trace = std::fs::read_to_string(dir.join("man/trapdetect-trace.1")).unwrap();
        assert!(
            trace.starts_with(".ie \\n(.g .ds Aq") || trace.contains(".TH"),
            "{trace}"
        );
        assert!(trace.contains("trapdetect\\-trace"), "title: {trace}");
        assert!(trace.contains("\\-\\-watch\\-client"), "options missing");
        assert!(trace.contains("Exit codes"), "exit codes missing");

        let comp = write_completions(&Cli::command(), &dir.join("comp")).unwrap();
        let files: Vec<String> = comp
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(files, ["trapdetect.bash", "_trapdetect", "trapdetect.fish"]);
        let bash = std::fs::read_to_string(dir.join("comp/trapdetect.bash")).unwrap();
        assert!(bash.contains("wait-drain") && bash.contains("--mem-budget"));
        let fish = std::fs::read_to_string(dir.join("comp/trapdetect.fish")).unwrap();
        assert!(fish.contains("-l watch-client"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// One help style: every command's help ends with the exit codes it can return.
mod help_style {
    use clap::CommandFactory;

    use crate::cli::Cli;

    #[test]
    fn every_command_lists_its_exit_codes_and_takes_q_the_same_way() {
        let mut root = Cli::command();
        root.build();
        let mut cmds = vec![root.clone()];
        cmds.extend(
            root.get_subcommands()
                .filter(|s| s.get_name() != "help")
                .cloned(),
        );
        for mut c in cmds {
            let name = c.get_name().to_string();
            let help = c.render_long_help().to_string();
            let codes = help
                .split("Exit codes:")
                .nth(1)
                .unwrap_or_else(|| panic!("{name}: no `Exit codes:` block in --help"));
            for code in ["  0  ", "  2  "] {
                assert!(
                    codes.contains(code),
                    "{name}: exit code{code}missing:\n{codes}"
                );
            }
            // -q, where a command has it, is --quiet and says the same thing everywhere.
            if let Some(q) = c.get_arguments().find(|a| a.get_short() == Some('q')) {
                assert_eq!(q.get_long(), Some("quiet"), "{name}");
                let h = q.get_help().map(ToString::to_string).unwrap_or_default();
                assert!(
                    h.starts_with("No progress on stderr"),
                    "{name}: -q says {h:?}"
                );
            }
        }
    }
}

/// The docs/*.md synopses and OPTIONS against the CLI definition: every flag a command has is
/// in its synopsis, and every flag a synopsis or OPTIONS entry names exists.
mod docs_match_cli {
    use std::collections::{BTreeMap, BTreeSet};

    use clap::CommandFactory;

    use crate::cli::Cli;

    /// `--long` and `-s` tokens in `text`.
    fn flags(text: &str) -> BTreeSet<String> {
        text.split(|c: char| c.is_whitespace() || "[]|()`,".contains(c))
            .map(|t| t.split('=').next().unwrap_or(t).trim_end_matches("..."))
            .filter(|t| {
                let b = t.as_bytes();
                (t.starts_with("--") && t.len() > 2 && b[2].is_ascii_lowercase())
                    || (b.len() == 2 && b[0] == b'-' && b[1].is_ascii_alphabetic())
            })
            .map(str::to_string)
            .collect()
    }

    /// The subcommand a synopsis line is for (`sudo trapdetect --pid` is `trace`).
    fn synopsis_command(line: &str, subs: &[String]) -> Option<String> {
        let rest = line
            .trim()
            .trim_start_matches("sudo ")
            .strip_prefix("trapdetect ")?;
        let word = rest.split_whitespace().next()?;
        if word.starts_with('-') {
            Some("trace".into())
        } else {
            subs.iter().find(|s| *s == word).cloned()
        }
    }

    /// `(synopsis flags, OPTIONS flags)` per subcommand, from every docs/*.md.
    fn documented(subs: &[String]) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
        let docs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs");
        let mut out: BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> = BTreeMap::new();
        for entry in std::fs::read_dir(&docs).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            // The page's own command, from its `# trapdetect-<sub>(1)` title.
            let page_cmd = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("# trapdetect-"))
                .and_then(|l| l.strip_suffix("(1)"))
                .map(str::to_string);
            let mut section = "";
            let mut current: Option<String> = None;
            for line in text.lines() {
                if let Some(h) = line.strip_prefix("## ") {
                    section = h.trim();
                    current = None;
                    continue;
                }
                if section == "SYNOPSIS" || section == "COMMANDS" {
                    if !line.starts_with("    ") {
                        current = None;
                        continue;
                    }
                    if let Some(c) = synopsis_command(line, subs) {
                        current = Some(c);
                    } else if !line.trim_start().starts_with(['[', '-']) {
                        current = None;
                    }
                    if let Some(c) = &current {
                        out.entry(c.clone()).or_default().0.extend(flags(line));
                    }
                } else if section == "OPTIONS"
                    && let Some(c) = &page_cmd
                    && line.starts_with('`')
                {
                    // Definition terms: the backticked spans opening an entry.
                    let term = line.split(" — ").next().unwrap_or(line);
                    let spans: String = term
                        .split('`')
                        .skip(1)
                        .step_by(2)
                        .collect::<Vec<_>>()
                        .join(" ");
                    out.entry(c.clone()).or_default().1.extend(flags(&spans));
                }
            }
        }
        out
    }

    #[test]
    fn docs_synopses_match_the_cli_definition() {
        let mut root = Cli::command();
        root.build();
        let subs: Vec<String> = root
            .get_subcommands()
            .map(|s| s.get_name().to_string())
            .filter(|s| s != "help")
            .collect();
        let docs = documented(&subs);
        let mut problems = vec![];
        for sub in root.get_subcommands().filter(|s| s.get_name() != "help") {
            let name = sub.get_name();
            let Some((synopsis, options)) = docs.get(name) else {
                if !sub.is_hide_set() {
                    problems.push(format!("{name}: no synopsis in docs/*.md"));
                }
                continue;
            };
            let mut cli = BTreeSet::new();
            for a in sub.get_arguments() {
                if a.is_hide_set() || a.is_positional() {
                    continue;
                }
                let long = a.get_long().map(|l| format!("--{l}"));
                let short = a.get_short().map(|s| format!("-{s}"));
                if ["--help", "--version"].contains(&long.as_deref().unwrap_or("")) {
                    continue;
                }
                let in_synopsis = long.iter().chain(&short).any(|f| synopsis.contains(f));
                if !in_synopsis {
                    problems.push(format!(
                        "{name}: {} is missing from its synopsis",
                        long.clone().or(short.clone()).unwrap()
                    ));
                }
                cli.extend(long);
                cli.extend(short);
            }
            for f in synopsis.iter().chain(options) {
                if !cli.contains(f) {
                    problems.push(format!(
                        "{name}: docs name {f}, which the CLI does not have"
                    ));
                }
            }
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }
}

/// `trapdetect load`'s flags, once each, and the plan they build; bad ones are usage errors,
/// refused when parsed or when the plan is built.
mod load_flags {
    use std::time::Duration;

    use clap::Parser;

    use crate::{
        cli::{Cli, Command},
        cmd::load::{LoadArgs, plan, step_spec},
        load::{self, Arrival},
    };

    fn parse(extra: &[&str]) -> std::result::Result<LoadArgs, clap::Error> {
        let mut v = vec!["trapdetect", "load", "--url", "http://127.0.0.1:9/"];
        v.extend_from_slice(extra);
        match Cli::try_parse_from(v)?.command {
            Some(Command::Load(a)) => Ok(*a),
            other => panic!("{other:?}"),
        }
    }

    /// --shard divides the rate (each step's too) and records I/N; a bad one is one usage line.
    #[test]
    fn shard_divides_the_rate_and_is_echoed() {
        let args = |extra: &[&str]| parse(extra).unwrap();
        let p = plan(&args(&["--rate", "1000", "--shard", "2/4"])).unwrap();
        assert_eq!(p.rate, Some(250.0));
        assert_eq!(p.shard, Some(load::Shard { index: 2, count: 4 }));
        assert_eq!(p.phase(), 0.25);
        let echo = serde_json::to_value(p.echo("127.0.0.1:1")).unwrap();
        assert_eq!(echo["rate_per_s"], 250.0);
        assert_eq!(echo["shard"], serde_json::json!({"index": 2, "count": 4}));
        let p = plan(&args(&["--rate", "1000"])).unwrap();
        assert_eq!((p.rate, p.shard, p.phase()), (Some(1000.0), None, 0.0));
        let echo = serde_json::to_value(p.echo("127.0.0.1:1")).unwrap();
        assert!(
            echo.get("shard").is_none(),
            "absent without --shard: {echo}"
        );
        let e = plan(&args(&["--rate", "1000", "--shard", "3/2"])).unwrap_err();
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (2, "--shard 3/2: I must be between 1 and N".to_string())
        );
        // Each step's rate is this copy's share; --shard is parsed once, by the plan.
        let a = args(&["--rate", "1000..3000", "--step", "500", "--shard", "1/4"]);
        let s = step_spec(&a, plan(&a).unwrap().shard).unwrap().unwrap();
        assert_eq!((s.from, s.to, s.step), (250.0, 750.0, 125.0));
        assert_eq!(s.rates(), [250.0, 375.0, 500.0, 625.0, 750.0]);
        let e = plan(&args(&[
            "--rate", "1..3", "--step", "1", "--shard", "1/1001",
        ]))
        .unwrap_err();
        assert_eq!(
            (e.exit_code(), e.to_string()),
            (
                2,
                "--shard 1/1001: N must be between 1 and 1000".to_string()
            )
        );
    }

    #[test]
    fn flags_parse_once_each() {
        let a = parse(&[
            "--rate",
            "800",
            "--arrival",
            "poisson",
            "--timeout",
            "2s",
            "--duration",
            "60s",
            "--warmup",
            "5s",
            "--host-header",
            "site-{01..03}",
            "--path-mix",
            "/=3,/a=1",
            "-H",
            "X-A: 1",
            "-H",
            "X-B: 2",
            "--method",
            "post",
            "--body",
            "x",
            "--seed",
            "9",
            "--no-keepalive",
            "--threads",
            "1",
            "--lag-budget",
            "5ms",
            "--json",
            "--strict",
            "--max-connections",
            "64",
            "--max-wait",
            "250ms",
            "--max-connect-rate",
            "100",
            "--max-errors",
            "5",
        ])
        .unwrap();
        assert_eq!(a.rate.map(|r| r.from), Some(800.0));
        assert_eq!(a.arrival, Arrival::Poisson);
        assert_eq!(a.warmup, Duration::from_secs(5));
        let p = plan(&a).unwrap();
        assert_eq!(p.hosts, ["site-01", "site-02", "site-03"]);
        assert_eq!(p.path_mix.len(), 2);
        assert_eq!(p.headers.len(), 2);
        assert_eq!((p.method.as_str(), p.body.as_slice()), ("POST", &b"x"[..]));
        assert!(!p.keepalive);
        assert_eq!(p.seed, 9);
        assert_eq!(p.lag_budget, Duration::from_millis(5));
        assert_eq!(p.max_connections, Some(64));
        assert_eq!(p.max_wait, Duration::from_millis(250));
        assert_eq!((p.connect_rate, p.max_errors_pct), (Some(100.0), 5.0));
        // Defaults: 512 connections, 1 s wait, 4 × 512 connects/s with keep-alive, 1 % errors.
        let d = plan(&parse(&["--rate", "10"]).unwrap()).unwrap();
        assert_eq!(d.budget(u64::MAX), 512);
        assert_eq!(d.budget(100), 100, "capped by the descriptors");
        assert_eq!(d.connect_rate_for(512), Some(2048.0));
        // Twice the offered rate when that is more: 3,530/s offered to a server that closes
        // every connection needs 3,530 connects/s, which 4 × 512 = 2,048 capped (issue 22).
        let f = plan(&parse(&["--rate", "3530"]).unwrap()).unwrap();
        assert_eq!(f.connect_rate_for(512), Some(7060.0));
        assert_eq!(
            (d.max_wait, d.max_errors_pct),
            (Duration::from_secs(1), 1.0)
        );
        let a = parse(&["--closed-loop", "-c", "8"]).unwrap();
        let p = plan(&a).unwrap();
        assert_eq!((p.closed_loop, p.rate), (Some(8), None));
        assert_eq!(
            parse(&["--rate", "1", "--warmup", "0"]).unwrap().warmup,
            Duration::ZERO
        );
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        for extra in [
            &["--rate", "0"][..],
            &["--rate", "-1"],
            &["--rate", "x"],
            &["--rate", "1", "--duration", "0s"],
            &["--rate", "1", "--duration", "2d"],
            &["--rate", "1", "--timeout", "forever"],
            &["--rate", "1", "--arrival", "burst"],
            &["--closed-loop"],
            &["-c", "4", "--rate", "1"],
            &["--rate", "1", "--host-header", "a", "--hosts", "/dev/null"],
            &["--rate", "1", "--max-errors", "-1"],
            &["--rate", "1", "--max-connections", "x"],
        ] {
            assert_eq!(parse(extra).unwrap_err().exit_code(), 2, "{extra:?}");
        }
        // Parsed, but refused when the plan is built.
        for extra in [
            &[][..],
            &["--rate", "1", "--closed-loop", "-c", "0"],
            &["--rate", "1", "-H", "NoColon"],
            &["--rate", "1", "--host-header", "x{9..1}"],
            &["--rate", "1", "--path-mix", "nopath=1"],
            &["--rate", "1", "--threads", "0"],
            &["--rate", "1", "--warmup", "23h", "--duration", "2h"],
            &["--rate", "1", "--max-connections", "0"],
            &["--rate", "1", "--max-errors", "101"],
        ] {
            let a = parse(extra).unwrap();
            assert_eq!(plan(&a).unwrap_err().exit_code(), 2, "{extra:?}");
        }
    }
}
