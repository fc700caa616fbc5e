//! The load's part of the HTML page, drawn from the typed run ([`Summary`]) the text and the
//! JSON come from: the key figures, the per-second charts, the latency histogram per status
//! class and the run's details, collapsed.

use std::fmt::Write as _;

use serde_json::{Map, Value};

use super::Summary;
use crate::report::{
    chart::{self, Histogram, Marks, Series, Timeline},
    html::{figure, kv, value},
    units,
};

impl Summary {
    /// The load's part of the page, its charts shaded at `marks`.
    pub fn html_part(&self, marks: &[Marks]) -> String {
        let mut o = String::new();
        self.figures(&mut o);
        if !self.series.is_empty() {
            self.timelines(&mut o, marks);
            self.histogram(&mut o);
        }
        self.details(&mut o);
        o
    }

    /// Rates, success, errors, 2xx latency.
    fn figures(&self, o: &mut String) {
        let mut rows = vec![
            (
                "offered",
                format!("{}/s", units::fmt_num(self.offered_rate_per_s)),
            ),
            (
                "delivered (2xx)",
                format!("{}/s", units::fmt_num(self.delivered_rate_per_s)),
            ),
            (
                "success ratio",
                format!("{:.1} %", self.success_ratio * 100.0),
            ),
            (
                "errors",
                format!("{} (non-2xx {})", self.errors_total, self.non_2xx),
            ),
        ];
        if let Some(lat) = &self.latency_2xx {
            rows.push((
                "2xx latency",
                [
                    ("p50", lat.p50_us),
                    ("p90", lat.p90_us),
                    ("p99", lat.p99_us),
                    ("p99.9", lat.p99_9_us),
                    ("max", lat.max_us),
                ]
                .iter()
                .map(|(k, v)| format!("{k} {}", chart::duration_us(*v)))
                .collect::<Vec<_>>()
                .join(" · "),
            ));
        }
        kv(o, &rows);
    }

    /// Per second: offered vs delivered vs errors, 2xx latency, in flight.
    fn timelines(&self, o: &mut String, marks: &[Marks]) {
        let col = |f: fn(&super::Point) -> Option<f64>| -> Vec<Option<f64>> {
            self.series.iter().map(f).collect()
        };
        let timeline = |title: &str, unit: &str, series: Vec<Series>, log_y: bool| Timeline {
            title: title.into(),
            unit: unit.into(),
            series,
            marks: marks.to_vec(),
            log_y,
        };
        let series = |name: &str, values: Vec<Option<f64>>| Series {
            name: name.into(),
            values,
        };
        figure(
            o,
            timeline(
                "Offered vs delivered vs errors",
                "per second",
                vec![
                    series("offered", col(|p| Some(p.scheduled as f64))),
                    series("delivered (2xx)", col(|p| Some(p.ok_2xx as f64))),
                    series(
                        "errors + non-2xx",
                        col(|p| Some((p.non_2xx + p.errors.total()) as f64)),
                    ),
                ],
                false,
            )
            .svg(),
        );
        let mut latency = vec![];
        if self.series.iter().any(|p| p.lat_2xx_mean_us.is_some()) {
            latency.push(series("2xx mean", col(|p| p.lat_2xx_mean_us)));
        }
        if self.series.iter().any(|p| p.lat_2xx_p99_us.is_some()) {
            latency.push(series("2xx p99", col(|p| p.lat_2xx_p99_us)));
        }
        figure(
            o,
            timeline(
                "2xx latency per second (from the intended send time)",
                "latency (log scale)",
                latency,
                true,
            )
            .svg(),
        );
        figure(
            o,
            timeline(
                "In flight (highest each second)",
                "requests",
                vec![series("in flight", col(|p| Some(p.in_flight_max as f64)))],
                false,
            )
            .svg(),
        );
    }

    /// The latency histogram per status class (2xx, non-2xx).
    fn histogram(&self, o: &mut String) {
        let h = &self.latency_histograms;
        let classes = [("2xx", &h.ok_2xx), ("non-2xx", &h.non_2xx)]
            .into_iter()
            .filter_map(|(name, d)| {
                let steps: Vec<(f64, u64)> = d
                    .as_ref()?
                    .steps
                    .iter()
                    .map(|s| (s[0], s[2] as u64))
                    .collect();
                (!steps.is_empty())
                    .then(|| (name.to_string(), chart::buckets_from_steps(&steps, 10)))
            })
            .collect();
        figure(
            o,
            Histogram {
                title: "Latency histogram per status class".into(),
                classes,
            }
            .svg(),
        );
    }

    /// The run's own details beyond its key figures and charts, collapsed.
    fn details(&self, o: &mut String) {
        let Ok(Value::Object(all)) = serde_json::to_value(self) else {
            return;
        };
        let rest: Map<String, Value> = [
            "plan",
            "window",
            "status",
            "errors",
            "service_time_2xx",
            "connect_time",
            "sched_lag",
            "in_flight",
            "fd_limit",
            "connections",
            "warmup",
            "generator",
        ]
        .iter()
        .filter_map(|k| Some((k.to_string(), all.get(*k)?.clone())))
        .collect();
        let _ = write!(
            o,
            "<details><summary>load run details</summary><div class=\"wrap\">"
        );
        value(o, "", &Value::Object(rest));
        let _ = write!(o, "</div></details>");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::load::summary::Distribution;
    use crate::report::html::tests::golden;

    /// `s` as `trapdetect load --json` saves it.
    fn document(s: &Summary) -> Value {
        let mut doc = serde_json::to_value(s).unwrap();
        doc["findings"] = json!([]);
        doc["ignored"] = json!([{"id": "z", "severity": "info", "title": "ignored <z>"}]);
        doc["measurement"] = json!({"trusted": true, "problems": []});
        doc["exit_code"] = json!(0);
        doc
    }

    /// A load run's page: its figures, its three per-second charts and its histogram, drawn
    /// from the typed run, shaded where the generator lagged and in the drain; pins the HTML.
    #[test]
    fn a_load_runs_page_is_drawn_from_the_run_with_its_lagged_seconds_shaded() {
        let mut s = super::super::render::tests::summary(5);
        s.plan.url = "http://127.0.0.1:1/<b>".into();
        (s.delivered_rate_per_s, s.success_ratio) = (90.0, 0.9);
        s.latency_histograms.ok_2xx = Some(Distribution {
            count: 270,
            mean_us: 900.0,
            stdev_us: 300.0,
            max_us: 4000.0,
            steps: vec![
                [500.0, 0.5, 135.0],
                [2500.0, 0.99, 267.0],
                [4000.0, 1.0, 270.0],
            ],
        });
        s.plan.lag_budget_us = 5000.0;
        let budget = s.plan.lag_budget_us;
        let lagged = s
            .series
            .iter()
            .filter(|p| p.sched_lag_max_us > budget)
            .count();
        assert!(lagged > 0 && lagged < s.series.len(), "{lagged}");
        let page = crate::sections::html(&document(&s));
        // Three timelines and the histogram, each shaded alike.
        assert_eq!(page.matches("<svg").count(), 4, "{page}");
        assert_eq!(
            page.matches(&format!("generator lagged ({lagged} s)"))
                .count(),
            3,
            "{page}"
        );
        // Seconds 5 and 6 of 7 are the drain after a window of 4.996 s.
        assert_eq!(page.matches("drain (2 s)").count(), 3, "{page}");
        assert!(page.contains("<tr><th>delivered (2xx)</th><td>90/s</td></tr>"));
        assert!(page.contains("<tr><th>success ratio</th><td>90.0 %</td></tr>"));
        assert!(page.contains("<tr><th>errors</th><td>6 (non-2xx 12)</td></tr>"));
        assert!(page.contains("http://127.0.0.1:1/&lt;b&gt;"));
        assert!(!page.contains("/<b>") && !page.contains("<z>"));
        assert!(!page.contains("could not be read back"), "{page}");
        golden("load.html", &page);
    }

    /// A run without seconds (a trace's probe load cut short) has its figures and details,
    /// no charts.
    #[test]
    fn a_load_without_seconds_has_its_figures_and_no_charts() {
        let mut s = super::super::render::tests::summary(2);
        s.series.clear();
        let part = s.html_part(&[]);
        assert!(!part.contains("<svg"), "{part}");
        assert!(part.contains("<tr><th>offered</th>"), "{part}");
        assert!(
            part.contains("<summary>load run details</summary>"),
            "{part}"
        );
    }
}
