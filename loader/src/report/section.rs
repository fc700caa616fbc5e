//! One trait for every part of a report beyond the findings (`network`, `load`, `run`, `host`
//! ...): its name, its JSON value, its text and its HTML. The gatherers' data types implement
//! it here in report/ (or next to their orchestrator), so that host/ gathers and never renders.

use serde::Serialize;
use serde_json::Value;

use super::Report;
use crate::escape;

/// A section of a report, rendered in every format from one value.
pub trait Section {
    /// The key under which the JSON report holds it, and its heading in text and HTML.
    fn name(&self) -> &'static str;
    /// Its JSON value (flattened into the report under `name`).
    fn json(&self) -> Result<Value, String>;
    /// Its text rendering (indented lines, under the upper-cased name).
    fn text(&self) -> String;
    /// Its HTML rendering (a fragment): the text, escaped, unless a section has better.
    fn html(&self) -> String {
        format!("<pre>{}</pre>", escape::html(&self.text()))
    }
}

/// The JSON value of a serialisable section.
pub fn to_json<T: Serialize>(t: &T) -> Result<Value, String> {
    serde_json::to_value(t).map_err(|e| e.to_string())
}

/// A section whose JSON and text were built elsewhere (an external generator's `load`).
pub struct Prebuilt {
    pub name: &'static str,
    pub json: Value,
    pub text: String,
}

impl Section for Prebuilt {
    fn name(&self) -> &'static str {
        self.name
    }
    fn json(&self) -> Result<Value, String> {
        Ok(self.json.clone())
    }
    fn text(&self) -> String {
        self.text.clone()
    }
}

impl Report {
    /// Adds a section in every format. One that cannot be serialised is left out with a note.
    pub fn add(&mut self, s: &dyn Section) {
        match s.json() {
            Ok(json) => {
                let name = s.name().to_string();
                self.sections.insert(name.clone(), json);
                self.section_text.push((name.clone(), s.text()));
                self.section_html.push((name, s.html()));
            }
            Err(e) => self.measurement.notes.push(format!(
                "the {} section could not be serialised: {e}",
                s.name()
            )),
        }
    }
}
