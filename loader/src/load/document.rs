//! The JSON document of `trapdetect load` (`trapdetect.load/1`), its verdict and its text.

use serde::{Deserialize, Serialize};

use crate::{
    load::{self, Plan, Summary},
    report::{Measurement, Report},
    traps::Finding,
};

/// The JSON document `trapdetect load --json` prints (`schema` = `trapdetect.load/1`).
/// `trapdetect report` reads it back and prints it with [`text`], as the run did.
#[derive(Debug, Serialize, Deserialize)]
pub struct Document {
    /// The run.
    #[serde(flatten)]
    pub summary: Summary,
    /// Findings, fail first.
    pub findings: Vec<Finding>,
    /// Findings silenced with --ignore.
    pub ignored: Vec<Finding>,
    /// Trust: `trusted` and `problems` (the generator has no notes or probe counters).
    #[serde(serialize_with = "trust_only")]
    pub measurement: Measurement,
    /// The exit code.
    pub exit_code: i32,
}

/// The load document's `measurement`: the report's, without the fields a load never fills.
fn trust_only<S: serde::Serializer>(m: &Measurement, s: S) -> std::result::Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Measurement", 2)?;
    st.serialize_field("trusted", &m.trusted)?;
    st.serialize_field("problems", &m.problems)?;
    st.end()
}

/// Exit code and trust for a finished run.
pub fn verdict(
    s: &Summary,
    plan: &Plan,
    ignore: &[String],
    strict: bool,
) -> (Vec<Finding>, Vec<Finding>, Measurement, i32) {
    let mut r = Report::new("load");
    r.findings = load::findings(s, plan);
    r.measurement.problems = load::problems(s, plan);
    r.measurement.trusted = r.measurement.problems.is_empty();
    r.finish(ignore, strict);
    (r.findings, r.ignored, r.measurement, r.exit_code)
}

/// The text report: the summary, then the findings and the verdict.
pub fn text(doc: &Document) -> String {
    let mut o = load::render_text(&doc.summary);
    o.push('\n');
    if doc.findings.is_empty() {
        o.push_str("no findings\n");
    }
    for f in &doc.findings {
        crate::report::text::finding(&mut o, f);
    }
    for f in &doc.ignored {
        o.push_str(&format!("ignored: {} {}\n", f.id, f.title));
    }
    if doc.measurement.trusted {
        o.push_str(&format!(
            "\n{} · exit {}\n",
            crate::report::color::verdict("measurement trusted", doc.exit_code),
            doc.exit_code
        ));
    } else {
        o.push_str(&format!(
            "\n{}: {} · exit {}\n",
            crate::report::color::verdict("MEASUREMENT UNTRUSTED", doc.exit_code),
            doc.measurement.problems.join("; "),
            doc.exit_code
        ));
    }
    o
}
