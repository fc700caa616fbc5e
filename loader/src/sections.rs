//! Every section of a report read back from its JSON into the type that made it: its text and
//! its part of the HTML page come from that type's [`Section`] code. The live report and a
//! saved one (`trapdetect report FILE.json`) both go through here, so a saved report prints
//! the live text and renders the live page.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::report::{
    Report, Section,
    html::{self, Parts},
    preflight,
};

/// `v` read back as the type of the section named `name` (`None`: a section the command
/// keeps in its JSON only).
fn read_back(
    command: &str,
    name: &str,
    v: &Value,
) -> std::result::Result<Option<Box<dyn Section>>, String> {
    fn typed<T: DeserializeOwned + Section + 'static>(
        v: &Value,
    ) -> std::result::Result<Option<Box<dyn Section>>, String> {
        serde_json::from_value::<T>(v.clone())
            .map(|t| Some(Box::new(t) as Box<dyn Section>))
            .map_err(|e| e.to_string())
    }
    match name {
        "network" => typed::<crate::host::net::NetObservation>(v),
        "tracer" => typed::<crate::trace::cost::TracerCost>(v),
        "threads" => typed::<crate::trace::threads::ThreadTime>(v),
        // `run -- COMMAND` / `--load-results`: another generator's section.
        "load" if v.get("source").is_some() => {
            typed::<crate::load::external::section::ExternalLoad>(v)
        }
        "load" => typed::<crate::load::Summary>(v),
        "run" => typed::<crate::trace::run::section::RunSection>(v),
        "sample" => typed::<crate::sample::SampleSection>(v),
        "host" => typed::<preflight::HostSection>(v),
        "fpm" => typed::<preflight::FpmSection>(v),
        "dir_probe" => typed::<preflight::DirProbeSection>(v),
        "preflight" => typed::<preflight::PreflightSection>(v),
        // The fingerprint is for `compare` and the archive: preflight prints it, a trace or a
        // run keeps it in the JSON only.
        "fingerprint" if command == "preflight" => {
            typed::<crate::host::fingerprint::Fingerprint>(v)
        }
        "fingerprint" => Ok(None),
        other => Err(format!("no text for a section named {other}")),
    }
}

/// Each section's text, from the section read back into the type that rendered it live (in
/// the order the report holds them, which is the order they were added).
pub fn texts(r: &Report) -> Vec<(String, String)> {
    r.sections
        .iter()
        .filter_map(|(name, v)| {
            let text = match read_back(r.command, name, v) {
                Ok(s) => s?.text(),
                Err(e) => format!("  (this section could not be read back: {e})\n"),
            };
            Some((name.clone(), text))
        })
        .collect()
}

/// The HTML page of any trapdetect JSON document: a report's sections read back into their
/// types, each drawing its own part of the page (shaded at the seconds the document marks)
/// and giving its text; a load run's document drawn by the load's own code.
pub fn html(doc: &Value) -> String {
    let schema = doc.get("schema").and_then(Value::as_str).unwrap_or("");
    let mut parts = Parts::default();
    if schema.starts_with("trapdetect.load/") {
        let marks = html::second_marks(doc, doc);
        match serde_json::from_value::<crate::load::Summary>(doc.clone()) {
            Ok(s) => parts.bodies.push(("load".into(), s.html_part(&marks))),
            Err(e) => parts.unread.push(("load".into(), e.to_string())),
        }
    } else if schema.starts_with("trapdetect.report/") {
        match serde_json::from_value::<Report>(doc.clone()) {
            Ok(r) => {
                let marks = html::second_marks(doc, &doc["load"]);
                for (name, v) in &r.sections {
                    match read_back(r.command, name, v) {
                        Ok(Some(s)) => {
                            if let Some(b) = s.html(&marks) {
                                parts.bodies.push((name.clone(), b));
                            }
                            parts.texts.push((name.clone(), s.text()));
                        }
                        Ok(None) => {}
                        Err(e) => parts.unread.push((name.clone(), e)),
                    }
                }
            }
            Err(e) => parts.unread.push(("report".into(), e.to_string())),
        }
    }
    html::render_value(doc, &parts)
}

/// The HTML page of a live report: its JSON drawn as a saved one would be.
pub fn html_of(r: &Report) -> String {
    html(&serde_json::to_value(r).unwrap_or_default())
}
