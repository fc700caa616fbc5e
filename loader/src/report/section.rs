//! One trait for every part of a report beyond the findings (`network`, `load`, `run`, `host`
//! ...): its name, its JSON value, its text and its part of the HTML page. The gatherers' data
//! types implement it here in report/ (or next to their orchestrator), so that host/ gathers
//! and never renders. A report's text and page read each section back from the JSON into its
//! type (`sections.rs`), so a saved report prints and renders as the live one.

use serde::Serialize;
use serde_json::Value;

use super::{Report, chart::Marks};

/// A section of a report, rendered in every format from one value.
pub trait Section {
    /// The key under which the JSON report holds it, and its heading in text and HTML.
    fn name(&self) -> &'static str;
    /// Its JSON value (flattened into the report under `name`).
    fn json(&self) -> Result<Value, String>;
    /// Its text rendering (indented lines, under the upper-cased name).
    fn text(&self) -> String;
    /// Its part of the HTML page (a fragment under its own heading), its charts shaded at
    /// `marks`; `None`: the page shows it under Details, as a table of its JSON, with its
    /// text under Plumbing.
    fn html(&self, _marks: &[Marks]) -> Option<String> {
        None
    }
}

/// The JSON value of a serialisable section.
pub fn to_json<T: Serialize>(t: &T) -> Result<Value, String> {
    serde_json::to_value(t).map_err(|e| e.to_string())
}

impl Report {
    /// Adds a section in every format. One that cannot be serialised is left out with a note.
    pub fn add(&mut self, s: &dyn Section) {
        match s.json() {
            Ok(json) => {
                let name = s.name().to_string();
                self.sections.insert(name.clone(), json);
                self.section_text.push((name, s.text()));
            }
            Err(e) => self.measurement.notes.push(format!(
                "the {} section could not be serialised: {e}",
                s.name()
            )),
        }
    }
}
