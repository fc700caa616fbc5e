//! The preflight report's text and its sections (`host`, `fpm`, `dir_probe`, `preflight`): each
//! section one struct whose JSON and text come from it, so `trapdetect report` on a saved
//! preflight prints what the check printed.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    Report,
    chart::{Bars, Marks, duration_us},
    html::{collapsed, figure},
    section::{Section, to_json},
};
use crate::{
    host::{
        cpu::{CpuFreq, CpuHost, Turbo},
        dirprobe::{DirProbe, Op},
        host as hostinfo,
    },
    traps::{self, Severity, dir_probe::Row, fpm::human_bytes},
};

/// The `host` section: CPUs, load, memory, virtualisation and the noise sample.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HostSection {
    /// Online CPUs.
    pub cpus_online: usize,
    /// The same, as the kernel lists them.
    pub cpus_online_list: String,
    /// `isolcpus=`.
    pub cpus_isolated: String,
    /// `smt/control`.
    pub smt_control: Option<String>,
    /// `smt/active`.
    pub smt_active: Option<bool>,
    /// Frequency scaling per CPU.
    pub cpufreq: Vec<CpuFreq>,
    /// Turbo.
    pub turbo: Option<Turbo>,
    /// /proc/loadavg.
    pub load: Option<hostinfo::LoadAvg>,
    /// /proc/pressure/cpu.
    pub cpu_pressure: Option<hostinfo::Psi>,
    /// Memory.
    pub memory: hostinfo::Memory,
    /// Virtualisation.
    pub virt: hostinfo::Virt,
    /// Other processes' CPU over the sample.
    pub sample: Option<hostinfo::NoiseSample>,
}

impl HostSection {
    /// The section of the host's observations.
    pub fn of(
        h: &CpuHost,
        load: Option<hostinfo::LoadAvg>,
        cpu_pressure: Option<hostinfo::Psi>,
        memory: &hostinfo::Memory,
        virt: &hostinfo::Virt,
        sample: Option<&hostinfo::NoiseSample>,
    ) -> HostSection {
        HostSection {
            cpus_online: h.online.len(),
            cpus_online_list: h.online_list.clone(),
            cpus_isolated: h.isolated.clone(),
            smt_control: h.smt_control.clone(),
            smt_active: h.smt_active,
            cpufreq: h.freq.clone(),
            turbo: h.turbo.clone(),
            load,
            cpu_pressure,
            memory: memory.clone(),
            virt: virt.clone(),
            sample: sample.cloned(),
        }
    }
}

impl Section for HostSection {
    fn name(&self) -> &'static str {
        "host"
    }
    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }
    /// Where the CPU went during the host sample (the target, the busiest others), then the
    /// whole section, collapsed; without a sample, nothing of its own.
    fn html(&self, _marks: &[Marks]) -> Option<String> {
        let sample = self.sample.as_ref()?;
        let mut o = String::new();
        // At most six bars, so their labels stay readable.
        let mut bars: Vec<(String, f64)> = vec![];
        if sample.target_cpus > 0.0 {
            bars.push(("target".into(), sample.target_cpus));
        }
        bars.push(("all others".into(), sample.others_cpus));
        let room = 6 - bars.len();
        bars.extend(
            sample
                .top
                .iter()
                .take(room)
                .map(|b| (format!("{} ({})", b.comm, b.pid), b.cpus)),
        );
        let _ = write!(o, "<h2>CPU during the sample</h2>");
        figure(
            &mut o,
            Bars {
                title: format!(
                    "CPUs' worth used over {}",
                    duration_us(sample.window_s * 1e6)
                ),
                unit: "CPUs".into(),
                categories: bars.iter().map(|(c, _)| c.clone()).collect(),
                measures: vec![("CPU".into(), bars.iter().map(|(_, v)| *v).collect())],
            }
            .svg(),
        );
        if let Ok(v) = to_json(self) {
            collapsed(&mut o, "host", &v);
        }
        Some(o)
    }
    fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(&format!(
            "  CPUs: {} online ({}); SMT: {}; isolated: {}\n",
            self.cpus_online,
            self.cpus_online_list,
            self.smt_control.as_deref().unwrap_or("?"),
            if self.cpus_isolated.is_empty() {
                "none"
            } else {
                &self.cpus_isolated
            }
        ));
        if self.cpufreq.is_empty() {
            s.push_str("  cpufreq: none exposed\n");
        } else {
            let g: Vec<String> = self
                .cpufreq
                .iter()
                .map(|f| format!("{}={}", f.cpu, f.governor.as_deref().unwrap_or("?")))
                .collect();
            s.push_str(&format!(
                "  governors: {}; turbo: {}\n",
                g.join(" "),
                self.turbo
                    .as_ref()
                    .map(|t| if t.enabled { "on" } else { "off" })
                    .unwrap_or("?")
            ));
        }
        if let Some(l) = &self.load {
            s.push_str(&format!(
                "  load average: {:.2} {:.2} {:.2} ({} runnable)\n",
                l.one, l.five, l.fifteen, l.running
            ));
        }
        let m = &self.memory;
        s.push_str(&format!(
            "  memory: {} total, {} available; swap {} used of {}\n",
            human_bytes(m.mem_total_kib * 1024),
            human_bytes(m.mem_available_kib * 1024),
            human_bytes(m.swap_used_kib * 1024),
            human_bytes(m.swap_total_kib * 1024)
        ));
        let v = &self.virt;
        s.push_str(&format!(
            "  virtualisation: {}\n",
            match (&v.wsl, &v.vendor, v.hypervisor_flag) {
                (Some(w), _, _) => w.to_string(),
                (None, Some(v), _) => v.clone(),
                (None, None, true) => "hypervisor (cpuinfo flag; no DMI vendor)".into(),
                _ => "none detected".into(),
            }
        ));
        if let Some(x) = &self.sample {
            s.push_str(&format!(
                "  sample {:.2} s: others {:.2} CPU, target {:.2} CPU, steal {:.1} %\n",
                x.window_s,
                x.others_cpus,
                x.target_cpus,
                x.steal_share * 100.0
            ));
        }
        s
    }
}

/// The `dir_probe` section: each probed directory's operations beside the local reference.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DirProbeSection {
    /// A lookup's excess over local that is material, µs.
    pub lookup_floor_us: f64,
    /// Any other operation's, µs.
    pub other_floor_us: f64,
    /// How many times the local cost an operation must take.
    pub ratio_floor: f64,
    /// The directories.
    pub dirs: Vec<ProbedDir>,
}

/// One probed directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProbedDir {
    /// The directory (escaped).
    pub dir: String,
    /// Wall time of the probe, ms.
    pub elapsed_ms: f64,
    /// Where the local reference was made, or why there is none.
    pub reference_dir: Option<String>,
    /// Why it was not measured.
    pub error: Option<String>,
    /// The probe could write its file there.
    pub wrote: bool,
    /// Notes of both sides.
    pub notes: Vec<String>,
    /// Each operation beside the reference.
    pub ops: Vec<OpRow>,
}

/// One operation of a probed directory (a [`Row`] with its name).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OpRow {
    /// The operation.
    pub op: Op,
    /// Its name.
    pub operation: String,
    /// Samples.
    pub n: usize,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Local median, µs.
    pub local_p50_us: Option<f64>,
    /// Local 99th percentile, µs.
    pub local_p99_us: Option<f64>,
    /// p50 ÷ local p50.
    pub slower_x: Option<f64>,
    /// p50 − local p99, µs.
    pub excess_us: Option<f64>,
    /// Past the floor and the ratio.
    pub material: bool,
}

impl DirProbeSection {
    /// The section of the probes run.
    pub fn of(probes: &[DirProbe]) -> DirProbeSection {
        DirProbeSection {
            lookup_floor_us: traps::dir_probe::lookup_floor_us(),
            other_floor_us: traps::dir_probe::other_floor_us(),
            ratio_floor: traps::dir_probe::RATIO,
            dirs: probes
                .iter()
                .map(|p| ProbedDir {
                    dir: p.dir.clone(),
                    elapsed_ms: p.elapsed_ms,
                    reference_dir: p.reference_dir.clone(),
                    error: p.error.clone(),
                    wrote: p.measured.wrote,
                    notes: p
                        .measured
                        .notes
                        .iter()
                        .chain(&p.reference.notes)
                        .cloned()
                        .collect(),
                    ops: traps::dir_probe::rows(p)
                        .into_iter()
                        .map(|r| OpRow {
                            op: r.op,
                            operation: r.op.name().to_string(),
                            n: r.n,
                            p50_us: r.p50_us,
                            p99_us: r.p99_us,
                            local_p50_us: r.local_p50_us,
                            local_p99_us: r.local_p99_us,
                            slower_x: r.slower_x,
                            excess_us: r.excess_us,
                            material: r.material,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

impl Section for DirProbeSection {
    fn name(&self) -> &'static str {
        "dir_probe"
    }
    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }
    fn text(&self) -> String {
        self.dirs
            .iter()
            .map(|d| {
                let rows: Vec<Row> = d
                    .ops
                    .iter()
                    .map(|r| Row {
                        op: r.op,
                        n: r.n,
                        p50_us: r.p50_us,
                        p99_us: r.p99_us,
                        local_p50_us: r.local_p50_us,
                        local_p99_us: r.local_p99_us,
                        slower_x: r.slower_x,
                        excess_us: r.excess_us,
                        material: r.material,
                    })
                    .collect();
                traps::dir_probe::table_of(
                    (&d.dir, d.elapsed_ms, d.reference_dir.as_deref()),
                    d.error.as_deref(),
                    &rows,
                    &d.notes,
                )
            })
            .collect()
    }
}

/// The `fpm` section: the pools read from PHP-FPM's configuration (the JSON as gathered).
pub struct FpmSection(pub Value);

impl Section for FpmSection {
    fn name(&self) -> &'static str {
        "fpm"
    }
    fn json(&self) -> Result<Value, String> {
        Ok(self.0.clone())
    }
    fn text(&self) -> String {
        let mut s = String::new();
        for u in self.0.as_array().into_iter().flatten() {
            s.push_str(&format!(
                "  config {}\n",
                u["config"].as_str().unwrap_or("-")
            ));
            if let Some(m) = u["master"].as_object() {
                s.push_str(&format!("  master {}\n", m["pid"]));
                for w in m["workers"].as_array().into_iter().flatten() {
                    s.push_str(&format!(
                        "    worker {} pool {}: RSS {} peak {}\n",
                        w["pid"],
                        w["pool"].as_str().unwrap_or("?"),
                        human_bytes(w["rss_kib"].as_u64().unwrap_or(0) * 1024),
                        human_bytes(w["hwm_kib"].as_u64().unwrap_or(0) * 1024)
                    ));
                }
            }
        }
        s
    }
}

impl<'de> Deserialize<'de> for FpmSection {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(FpmSection)
    }
}

/// The `preflight` section: what the check itself took and was given.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PreflightSection {
    /// Wall time of the check, ms.
    pub elapsed_ms: f64,
    /// The noise sample's window, s.
    pub sample_window_s: Option<f64>,
    /// `--dir`s as given and resolved.
    pub dirs: Vec<GivenDir>,
    /// `--strict`.
    pub strict: bool,
    /// `--verbose`: the text showed each finding's evidence and every section.
    #[serde(default)]
    pub verbose: bool,
    /// `--mark-file`.
    pub mark_file: Option<String>,
    /// Checks that could fail and did not run.
    pub incomplete: Vec<String>,
}

/// A `--dir` as given and as resolved.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GivenDir {
    /// As given (escaped).
    pub given: String,
    /// Resolved (escaped).
    pub resolved: String,
}

impl Section for PreflightSection {
    fn name(&self) -> &'static str {
        "preflight"
    }
    fn json(&self) -> Result<Value, String> {
        to_json(self)
    }
    fn text(&self) -> String {
        format!("  elapsed {} ms\n", self.elapsed_ms)
    }
}

/// Text: one line per finding (fail first) with its remedy, then ignored and skipped checks,
/// then a summary line. `verbose` adds each finding's evidence and the host facts.
pub fn render_text(r: &Report, verbose: bool) -> String {
    let mut out = String::new();
    let mut head = format!("trapdetect {} preflight", r.version);
    if let Some(t) = &r.target {
        head.push_str(&format!(": pid {} ({})", t.pid, t.comm));
    }
    if let Some(w) = r.window_s {
        head.push_str(&format!(", {w:.2} s sample"));
    }
    out.push_str(&head);
    out.push('\n');
    if let Some(how) = r.target.as_ref().and_then(|t| t.selected_by.as_ref()) {
        out.push_str(&format!("  target {how}\n"));
    }
    let incomplete: Vec<&str> = r
        .sections
        .get("preflight")
        .and_then(|p| p["incomplete"].as_array())
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if !incomplete.is_empty() {
        out.push_str(&format!(
            "INCOMPLETE: {} that could fail did not run: {} (why: the `skipped` lines below). \
             A pass does not clear {}; run with the privilege named, or --strict to fail on it.\n",
            if incomplete.len() == 1 {
                "1 check".to_string()
            } else {
                format!("{} checks", incomplete.len())
            },
            incomplete.join(", "),
            if incomplete.len() == 1 { "it" } else { "them" }
        ));
    }
    for f in &r.findings {
        push_finding(&mut out, f, verbose);
    }
    for f in &r.ignored {
        out.push_str(&format!(
            "ignored {} {}: {}\n",
            f.severity.label(),
            f.id,
            f.title
        ));
    }
    for s in &r.skipped {
        out.push_str(&format!("skipped {}: {}\n", s.check, s.reason));
    }
    // The directory probes' tables are the measurement a verdict on a --dir rests on.
    for (name, text) in &r.section_text {
        if name == "dir_probe" && !verbose {
            out.push_str(text);
        }
    }
    if verbose {
        for (name, text) in &r.section_text {
            out.push_str(&format!("{}\n{text}", name.to_uppercase()));
            if !text.ends_with('\n') {
                out.push('\n');
            }
        }
    }
    out.push_str(&summary_line(r));
    out
}

/// One finding's line (severity, id, title, remedy); `verbose` adds its evidence and
/// prediction under it.
fn push_finding(out: &mut String, f: &traps::Finding, verbose: bool) {
    out.push_str(&format!(
        "{} {}: {}",
        crate::report::color::severity(f.severity),
        f.id,
        f.title
    ));
    if !f.remedy.is_empty() {
        out.push_str(&format!(" — fix: {}", f.remedy));
    }
    out.push('\n');
    if verbose {
        let width = f.evidence.keys().map(|k| k.len()).max().unwrap_or(0);
        for (k, v) in &f.evidence {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push_str(&format!("     {k:width$}  {v}\n"));
        }
        if let Some(p) = &f.predicted {
            out.push_str(&format!("     predicted: {p}\n"));
        }
    }
}

/// The last line: the counts by severity, ignored and skipped, and the exit code.
fn summary_line(r: &Report) -> String {
    let count = |s: Severity| r.findings.iter().filter(|f| f.severity == s).count();
    let strict = r
        .sections
        .get("preflight")
        .and_then(|p| p["strict"].as_bool())
        .unwrap_or(false);
    format!(
        "preflight: {} fail, {} warn, {} info; {} ignored, {} skipped{} -> exit {}\n",
        count(Severity::Fail),
        count(Severity::Warn),
        count(Severity::Info),
        r.ignored.len(),
        r.skipped.len(),
        if strict {
            " (--strict: warnings fail)"
        } else {
            ""
        },
        r.exit_code
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Skipped;
    use crate::traps::{Finding, Id};
    use serde_json::json;

    /// The host's part of the page: the CPU the sample saw, the target first, then all others
    /// and the busiest of them (six bars at most), the section collapsed; without a sample the
    /// section has no part and the page lists it under Details.
    #[test]
    fn the_hosts_part_is_the_cpu_its_sample_saw() {
        let top = (1..=6)
            .map(|i| hostinfo::Busy {
                pid: i,
                comm: format!("p<{i}>"),
                cpus: 0.1 * f64::from(i),
            })
            .collect();
        let sample = hostinfo::NoiseSample {
            window_s: 2.0,
            others_cpus: 1.5,
            target_cpus: 0.75,
            top,
            ..Default::default()
        };
        let of = |sample: Option<&hostinfo::NoiseSample>| {
            HostSection::of(
                &CpuHost::default(),
                None,
                None,
                &Default::default(),
                &Default::default(),
                sample,
            )
        };
        let part = of(Some(&sample)).html(&[]).unwrap();
        assert!(part.starts_with("<h2>CPU during the sample</h2>"), "{part}");
        assert_eq!(part.matches("<svg").count(), 1, "{part}");
        assert!(part.contains("CPUs&apos; worth used over 2.0 s"), "{part}");
        // target, all others, then the four busiest that fit: p<5> and p<6> are left out.
        assert!(part.contains("p&lt;4&gt; (4)"), "{part}");
        assert!(
            !part.contains("p&lt;5&gt; (5)") && !part.contains("<5>"),
            "{part}"
        );
        assert!(part.contains("<details><summary>host</summary>"), "{part}");
        assert_eq!(of(None).html(&[]), None);
    }

    #[test]
    fn a_skipped_check_that_could_fail_is_prominent_and_fails_strict() {
        // As `build` assembles it: the section lists them, `finish` decides the exit code.
        let report = |skipped: Vec<Skipped>, ignore: &[String], strict: bool| {
            let mut r = Report::new("preflight");
            r.skipped = skipped;
            let incomplete = crate::report::incomplete(&r.skipped, ignore);
            r.sections.insert(
                "preflight".into(),
                json!({ "strict": strict, "incomplete": incomplete }),
            );
            r.incomplete_fails_strict = true;
            r.finish(ignore, strict);
            r
        };
        for strict in [false, true] {
            let r = report(
                vec![
                    Skipped {
                        check: "fs.cwd-slow".into(),
                        reason: "/proc/42/cwd: permission denied (needs CAP_SYS_PTRACE)".into(),
                    },
                    // cpu.frequency cannot fail: skipping it leaves the verdict whole.
                    Skipped {
                        check: "cpu.frequency".into(),
                        reason: "no cpufreq".into(),
                    },
                ],
                &[],
                strict,
            );
            assert_eq!(r.exit_code, if strict { 1 } else { 0 });
            assert_eq!(
                r.sections["preflight"]["incomplete"],
                json!(["fs.cwd-slow"])
            );
            let t = crate::report::preflight::render_text(&r, false);
            assert!(
                t.lines().nth(1).unwrap().starts_with(
                    "INCOMPLETE: 1 check that could fail did not run: fs.cwd-slow (why:"
                ),
                "{t}"
            );
        }
        // Ignored by the user: not missed.
        let r = report(
            vec![Skipped {
                check: "net.fd-limit".into(),
                reason: "census failed".into(),
            }],
            &["net.fd-limit".to_string()],
            true,
        );
        assert_eq!(r.exit_code, 0);
        assert_eq!(r.sections["preflight"]["incomplete"], json!([]));
    }

    #[test]
    fn text_is_one_line_per_finding_fail_first() {
        let mut r = Report::new("preflight");
        r.findings
            .push(Finding::new(Id::HostVirt, Severity::Info, "virtual machine").remedy("compare"));
        r.findings.push(
            Finding::new(Id::FsDirSlow, Severity::Fail, "--dir /mnt/c/x is on DrvFs")
                .with("fs_type", "9p")
                .remedy("use a local dir"),
        );
        r.findings
            .push(Finding::new(Id::CpuAffinity, Severity::Warn, "1 of 2").remedy("taskset"));
        r.skipped.push(Skipped {
            check: "host.kernel-log".into(),
            reason: "needs CAP_SYSLOG".into(),
        });
        r.finish(&["cpu.affinity".into()], false);
        let t = crate::report::preflight::render_text(&r, false);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[1],
            "FAIL fs.dir-slow: --dir /mnt/c/x is on DrvFs — fix: use a local dir"
        );
        assert_eq!(lines[2], "INFO host.virt: virtual machine — fix: compare");
        assert_eq!(lines[3], "ignored WARN cpu.affinity: 1 of 2");
        assert_eq!(lines[4], "skipped host.kernel-log: needs CAP_SYSLOG");
        assert_eq!(
            lines[5],
            "preflight: 1 fail, 0 warn, 1 info; 1 ignored, 1 skipped -> exit 1"
        );
        assert_eq!(lines.len(), 6);
    }
}
