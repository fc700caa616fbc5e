//! Charts for the HTML report, drawn with plotters' SVG backend into strings that are inlined
//! in the page. Text is emitted as SVG `<text>` (plotters escapes it) and set in the browser's
//! font, so nothing here needs a font file. A new per-second series is one more [`Series`] in
//! a [`Timeline`]; marked seconds (generator lag, lost events) are shaded behind the lines.

use plotters::{coord::Shift, prelude::*};

pub use super::units::{duration_us, human};

/// One line of a timeline: a value per second (`None`: no data that second, a gap).
pub struct Series {
    /// Legend text.
    pub name: String,
    /// Per-second values, index = second.
    pub values: Vec<Option<f64>>,
}

impl Series {
    /// A series from values that are all present.
    pub fn full(name: &str, values: impl IntoIterator<Item = f64>) -> Series {
        Series {
            name: name.to_string(),
            values: values.into_iter().map(Some).collect(),
        }
    }
}

/// Seconds to shade, and why (shown in the legend).
#[derive(Clone, Debug)]
pub struct Marks {
    /// Legend text (`generator lagged`, `events lost`); each set has its own shade, in
    /// [`MARKS`]'s order.
    pub label: String,
    /// Seconds.
    pub seconds: Vec<usize>,
}

/// A per-second chart.
pub struct Timeline {
    /// Title above the chart.
    pub title: String,
    /// Y axis unit.
    pub unit: String,
    /// Lines.
    pub series: Vec<Series>,
    /// Shaded seconds.
    pub marks: Vec<Marks>,
    /// Logarithmic y axis (latency spanning orders of magnitude).
    pub log_y: bool,
}

/// Line colours, distinguishable in print and for the common colour blindnesses (Okabe–Ito).
const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
];
/// Shades of marked seconds: light enough that the lines stay readable over them.
const MARKS: [RGBColor; 4] = [
    RGBColor(255, 205, 205),
    RGBColor(255, 226, 160),
    RGBColor(222, 222, 222),
    RGBColor(205, 225, 255),
];
const W: u32 = 760;
const H: u32 = 260;
const FONT: &str = "sans-serif";

type Res = Result<(), Box<dyn std::error::Error>>;

fn svg(draw: impl FnOnce(&DrawingArea<SVGBackend, Shift>) -> Res) -> Option<String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (W, H)).into_drawing_area();
        root.fill(&WHITE).ok()?;
        draw(&root).ok()?;
        root.present().ok()?;
    }
    Some(buf)
}

/// Upper end of an axis holding `max`: a little headroom, never zero.
fn top(max: f64) -> f64 {
    if max > 0.0 { max * 1.1 } else { 1.0 }
}

impl Timeline {
    /// The SVG, or `None` when there is nothing to draw.
    pub fn svg(&self) -> Option<String> {
        let n = self.series.iter().map(|s| s.values.len()).max()?;
        let values = || self.series.iter().flat_map(|s| s.values.iter().flatten());
        if n == 0 || values().next().is_none() {
            return None;
        }
        let max = values().copied().fold(0.0, f64::max);
        if self.log_y {
            let min = values()
                .copied()
                .filter(|v| *v > 0.0)
                .fold(f64::INFINITY, f64::min);
            if !min.is_finite() {
                return None;
            }
            let range = (min / 2.0)..(max * 2.0);
            svg(|root| self.draw(root, n, range.log_scale()))
        } else {
            svg(|root| self.draw(root, n, 0.0..top(max)))
        }
    }

    fn draw<Y>(&self, root: &DrawingArea<SVGBackend, Shift>, n: usize, y: Y) -> Res
    where
        Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
        Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 17))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..n as f64, y)?;
        let unit = self.unit.clone();
        chart
            .configure_mesh()
            .x_desc("second of the run")
            .y_desc(unit)
            .x_labels((n + 1).clamp(2, 13))
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| {
                if self.log_y {
                    log_label(*v, duration_us)
                } else {
                    human(*v)
                }
            })
            .light_line_style(RGBColor(238, 238, 238))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        let (ylo, yhi) = {
            let r = chart.y_range();
            (r.start, r.end)
        };
        shade(&mut chart, &self.marks, (ylo, yhi))?;
        for (i, s) in self.series.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            let style = c.stroke_width(2);
            // Each value is drawn at the middle of its second; gaps split the line.
            let mut segments: Vec<Vec<(f64, f64)>> = vec![vec![]];
            for (t, v) in s.values.iter().enumerate() {
                match v {
                    Some(v) if !self.log_y || *v > 0.0 => {
                        segments.last_mut().unwrap().push((t as f64 + 0.5, *v))
                    }
                    _ => segments.push(vec![]),
                }
            }
            let mut first = true;
            for seg in segments.into_iter().filter(|s| !s.is_empty()) {
                let points = seg.clone();
                let drawn = chart.draw_series(LineSeries::new(seg, style))?;
                if first {
                    drawn.label(s.name.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(3))
                    });
                    first = false;
                }
                // Lone points (one-second segments) would be invisible as a line.
                if points.len() == 1 {
                    chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
                }
            }
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

type Chart<'a, 'b> = ChartContext<
    'a,
    SVGBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// Shades marked seconds over the full height, one legend entry per kind (with its count).
fn shade<X, Y>(
    chart: &mut ChartContext<SVGBackend, Cartesian2d<X, Y>>,
    marks: &[Marks],
    (ylo, yhi): (f64, f64),
) -> Res
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, m) in marks.iter().enumerate() {
        if m.seconds.is_empty() {
            continue;
        }
        let c = MARKS[i % MARKS.len()];
        chart
            .draw_series(
                m.seconds
                    .iter()
                    .map(|&s| Rectangle::new([(s as f64, ylo), (s as f64 + 1.0, yhi)], c.filled())),
            )?
            .label(format!("{} ({} s)", m.label, m.seconds.len()))
            .legend(move |(x, y)| swatch(x, y, c));
    }
    Ok(())
}

/// Every chart's legend box: one style, at `pos`.
fn legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    pos: SeriesLabelPosition,
) -> Res
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(pos)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(200, 200, 200))
        .label_font((FONT, 12))
        .draw()?;
    Ok(())
}

/// A per-second chart of parts that add up (threads by state): stacked areas, the first
/// series at the bottom.
pub struct Stacked {
    /// Title above the chart.
    pub title: String,
    /// Y axis unit.
    pub unit: String,
    /// Parts, bottom first; a missing value counts as zero.
    pub series: Vec<Series>,
    /// Shaded seconds.
    pub marks: Vec<Marks>,
}

impl Stacked {
    /// The SVG, or `None` when there is nothing to draw.
    pub fn svg(&self) -> Option<String> {
        let n = self.series.iter().map(|s| s.values.len()).max()?;
        // Parts that are zero throughout would only crowd the legend.
        let parts: Vec<&Series> = self
            .series
            .iter()
            .filter(|s| s.values.iter().flatten().any(|v| *v > 0.0))
            .collect();
        if n == 0 || parts.is_empty() {
            return None;
        }
        let mut base = vec![0.0; n];
        let mut layers = vec![];
        for s in &parts {
            let lo = base.clone();
            for (t, b) in base.iter_mut().enumerate() {
                *b += s.values.get(t).copied().flatten().unwrap_or(0.0).max(0.0);
            }
            layers.push((lo, base.clone()));
        }
        let max = base.iter().copied().fold(0.0, f64::max);
        svg(|root| {
            let mut chart = frame(root, &self.title, n, 0.0..top(max))?;
            mesh(&mut chart, n, &self.unit, human)?;
            shade(&mut chart, &self.marks, (0.0, top(max)))?;
            for (i, (s, (lo, hi))) in parts.iter().zip(&layers).enumerate() {
                let c = PALETTE[i % PALETTE.len()];
                // Each second is a step: the value holds over the whole second.
                let mut outline: Vec<(f64, f64)> = vec![];
                for (t, v) in hi.iter().enumerate() {
                    outline.push((t as f64, *v));
                    outline.push((t as f64 + 1.0, *v));
                }
                for (t, v) in lo.iter().enumerate().rev() {
                    outline.push((t as f64 + 1.0, *v));
                    outline.push((t as f64, *v));
                }
                chart
                    .draw_series(std::iter::once(Polygon::new(outline, c.mix(0.8).filled())))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| swatch(x, y, c));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight)
        })
    }
}

fn frame<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    n: usize,
    y: std::ops::Range<f64>,
) -> Result<Chart<'a, 'b>, Box<dyn std::error::Error>> {
    Ok(ChartBuilder::on(root)
        .caption(title, (FONT, 17))
        .margin(10)
        .x_label_area_size(34)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..n as f64, y)?)
}

fn mesh(chart: &mut Chart<'_, '_>, n: usize, unit: &str, f: fn(f64) -> String) -> Res {
    chart
        .configure_mesh()
        .x_desc("second of the run")
        .y_desc(unit)
        .x_labels((n + 1).clamp(2, 13))
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| f(*v))
        .light_line_style(RGBColor(238, 238, 238))
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;
    Ok(())
}

/// Figures per load step: x is the step's offered rate, one line per measure, the knee drawn
/// as a vertical line with its own legend entry.
pub struct Steps {
    /// Title.
    pub title: String,
    /// Y axis unit.
    pub unit: String,
    /// Each step's planned rate, req/s.
    pub rates: Vec<f64>,
    /// Lines: one value per step.
    pub series: Vec<Series>,
    /// The knee's rate, req/s.
    pub knee: Option<f64>,
    /// Latency on a logarithmic axis.
    pub log_y: bool,
}

impl Steps {
    /// The SVG, or `None` when there is nothing to draw.
    pub fn svg(&self) -> Option<String> {
        let vals = || {
            self.series
                .iter()
                .flat_map(|s| s.values.iter().flatten().copied())
        };
        if self.rates.is_empty() || vals().next().is_none() {
            return None;
        }
        let (x0, x1) = self
            .rates
            .iter()
            .fold((f64::INFINITY, 0f64), |(a, b), r| (a.min(*r), b.max(*r)));
        // Half a step of room either side, so the first and last points are not on the frame.
        let pad = if self.rates.len() > 1 {
            (x1 - x0) / (self.rates.len() - 1) as f64 / 2.0
        } else {
            x0.max(1.0) / 2.0
        };
        let x = (x0 - pad).max(0.0)..x1 + pad;
        let max = vals().fold(0.0, f64::max);
        if self.log_y {
            let min = vals().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
            if !min.is_finite() {
                return None;
            }
            svg(|root| self.draw(root, x.clone(), ((min / 2.0)..(max * 2.0)).log_scale()))
        } else {
            svg(|root| self.draw(root, x.clone(), 0.0..top(max)))
        }
    }

    fn draw<Y>(&self, root: &DrawingArea<SVGBackend, Shift>, x: std::ops::Range<f64>, y: Y) -> Res
    where
        Y: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
        Y::CoordDescType: plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 17))
            .margin(10)
            .x_label_area_size(34)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)?;
        let log = self.log_y;
        chart
            .configure_mesh()
            .x_desc("offered rate of the step (req/s)")
            .y_desc(self.unit.clone())
            .x_labels(self.rates.len().clamp(2, 12))
            .x_label_formatter(&|v| human(*v))
            .y_label_formatter(&|v| {
                if log {
                    log_label(*v, duration_us)
                } else {
                    human(*v)
                }
            })
            .light_line_style(RGBColor(238, 238, 238))
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        let (ylo, yhi) = {
            let r = chart.y_range();
            (r.start, r.end)
        };
        if let Some(k) = self.knee {
            let c = RGBColor(176, 0, 32);
            chart
                .draw_series(std::iter::once(PathElement::new(
                    vec![(k, ylo), (k, yhi)],
                    c.stroke_width(2),
                )))?
                .label(format!("knee {}/s", human(k)))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x + 7, y - 6), (x + 7, y + 6)], c.stroke_width(2))
                });
        }
        for (i, s) in self.series.iter().enumerate() {
            let c = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = self
                .rates
                .iter()
                .zip(&s.values)
                .filter_map(|(r, v)| v.filter(|v| !log || *v > 0.0).map(|v| (*r, v)))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(3))
                });
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
        }
        legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// One group of bars per category (a filesystem), one bar per measure.
pub struct Bars {
    /// Title.
    pub title: String,
    /// Y axis unit.
    pub unit: String,
    /// Category labels (already escaped for display; plotters escapes for XML).
    pub categories: Vec<String>,
    /// Measures: name and one value per category.
    pub measures: Vec<(String, Vec<f64>)>,
}

impl Bars {
    /// The SVG, or `None` when there is nothing to draw.
    pub fn svg(&self) -> Option<String> {
        let n = self.categories.len();
        let max = self
            .measures
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .fold(0.0, f64::max);
        if n == 0 || self.measures.is_empty() || max <= 0.0 {
            return None;
        }
        svg(|root| {
            let mut chart = ChartBuilder::on(root)
                .caption(&self.title, (FONT, 17))
                .margin(10)
                .x_label_area_size(34)
                .y_label_area_size(64)
                .build_cartesian_2d(0f64..n as f64, 0f64..top(max))?;
            let cats = self.categories.clone();
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_labels(n * 2 + 1)
                .x_label_formatter(&|v| {
                    // Labels only at the middle of each category.
                    let i = v.floor() as usize;
                    if (v - i as f64 - 0.5).abs() < 1e-6 && i < cats.len() {
                        short(&cats[i], 28)
                    } else {
                        String::new()
                    }
                })
                .y_desc(self.unit.clone())
                .y_label_formatter(&|v| human(*v))
                .light_line_style(RGBColor(238, 238, 238))
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 13))
                .draw()?;
            let m = self.measures.len() as f64;
            let width = 0.8 / m;
            for (j, (name, vals)) in self.measures.iter().enumerate() {
                let c = PALETTE[j % PALETTE.len()];
                chart
                    .draw_series(vals.iter().enumerate().map(|(i, v)| {
                        let x0 = i as f64 + 0.1 + j as f64 * width;
                        Rectangle::new([(x0, 0.0), (x0 + width * 0.92, *v)], c.filled())
                    }))?
                    .label(name.clone())
                    .legend(move |(x, y)| swatch(x, y, c));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight)
        })
    }
}

/// A legend swatch for bars: a thick short stroke, so that every filled rectangle in the SVG
/// is data (the browser test counts them).
fn swatch(x: i32, y: i32, c: RGBColor) -> PathElement<(i32, i32)> {
    PathElement::new(vec![(x, y), (x + 14, y)], c.stroke_width(10))
}

/// A histogram bucket: `(lo_us, hi_us, count)`.
pub type Bucket = (f64, f64, u64);

/// A latency histogram on a logarithmic latency axis: counts per bucket `[lo, hi)` µs, one
/// colour per status class.
pub struct Histogram {
    /// Title.
    pub title: String,
    /// Per class: name and `(lo_us, hi_us, count)` buckets.
    pub classes: Vec<(String, Vec<Bucket>)>,
}

impl Histogram {
    /// The SVG, or `None` when there is nothing to draw.
    pub fn svg(&self) -> Option<String> {
        let all = || self.classes.iter().flat_map(|(_, b)| b.iter());
        let lo = all()
            .map(|b| b.0)
            .filter(|v| *v > 0.0)
            .fold(f64::INFINITY, f64::min);
        let hi = all().map(|b| b.1).fold(0.0, f64::max);
        let max = all().map(|b| b.2).max()?;
        if !lo.is_finite() || hi <= lo || max == 0 {
            return None;
        }
        svg(|root| {
            let mut chart = ChartBuilder::on(root)
                .caption(&self.title, (FONT, 17))
                .margin(10)
                .x_label_area_size(34)
                .y_label_area_size(64)
                .build_cartesian_2d((lo..hi).log_scale(), 0f64..top(max as f64))?;
            chart
                .configure_mesh()
                .x_desc("latency (log scale)")
                .y_desc("requests")
                .x_label_formatter(&|v| log_label(*v, duration_us))
                .y_label_formatter(&|v| human(*v))
                .light_line_style(RGBColor(238, 238, 238))
                .label_style((FONT, 12))
                .axis_desc_style((FONT, 13))
                .draw()?;
            for (j, (name, buckets)) in self.classes.iter().enumerate() {
                let c = PALETTE[j % PALETTE.len()];
                let fill = c.mix(if self.classes.len() > 1 { 0.6 } else { 0.85 });
                chart
                    .draw_series(buckets.iter().filter(|b| b.2 > 0).map(|&(l, h, n)| {
                        Rectangle::new([(l.max(lo), 0.0), (h, n as f64)], fill.filled())
                    }))?
                    .label(name.clone())
                    .legend(move |(x, y)| swatch(x, y, c));
            }
            legend(&mut chart, SeriesLabelPosition::UpperRight)
        })
    }
}

/// Labels on a log axis only at 1, 2 and 5 × 10^k: the other ticks stay, unlabelled, so the
/// labels never overlap.
fn log_label(v: f64, f: fn(f64) -> String) -> String {
    if v <= 0.0 {
        return String::new();
    }
    let lead = v / 10f64.powf(v.log10().floor());
    if [1.0, 2.0, 5.0].iter().any(|d| (lead - d).abs() < 1e-6) {
        f(v)
    } else {
        String::new()
    }
}

/// Shortens a label to `n` characters, keeping its end (a path's last components say most).
fn short(s: &str, n: usize) -> String {
    let c = s.chars().count();
    if c <= n {
        s.to_string()
    } else {
        format!("…{}", s.chars().skip(c - n + 1).collect::<String>())
    }
}

/// Histogram buckets from cumulative `(value, count at or below)` steps: the count between
/// consecutive distinct values, on log-spaced bucket edges (`per_decade` buckets per ×10).
pub fn buckets_from_steps(steps: &[(f64, u64)], per_decade: u32) -> Vec<(f64, f64, u64)> {
    let pts: Vec<(f64, u64)> = steps.iter().copied().filter(|(v, _)| *v > 0.0).collect();
    let Some(&(first, _)) = pts.first() else {
        return vec![];
    };
    let last = pts.last().map(|p| p.0).unwrap_or(first);
    let step = 10f64.powf(1.0 / per_decade as f64);
    let mut lo = 10f64.powf((first.log10() * per_decade as f64).floor() / per_decade as f64);
    let mut out = vec![];
    let mut prev_total = 0u64;
    let mut k = 0;
    while lo <= last {
        let hi = lo * step;
        // Cumulative count at the last step whose value is below `hi`.
        while k < pts.len() && pts[k].0 < hi {
            k += 1;
        }
        let total = if k == 0 { 0 } else { pts[k - 1].1 };
        out.push((lo, hi, total.saturating_sub(prev_total)));
        prev_total = total;
        lo = hi;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_from_the_target_are_escaped_in_the_svg() {
        let b = Bars {
            title: "lookups".into(),
            unit: "per request".into(),
            categories: vec!["/srv/<script>alert(1)</script>".into()],
            measures: vec![("lookups".into(), vec![3.0])],
        };
        let s = b.svg().unwrap();
        assert!(!s.contains("<script>"), "{s}");
        assert!(s.contains("&lt;/script&gt;"), "{s}");
    }

    #[test]
    fn timelines_draw_lines_marks_and_gaps() {
        let t = Timeline {
            title: "rate".into(),
            unit: "req/s".into(),
            series: vec![
                Series::full("offered", [100.0, 100.0, 100.0, 100.0]),
                Series {
                    name: "p99".into(),
                    values: vec![Some(5.0), None, Some(7.0), Some(8.0)],
                },
            ],
            marks: vec![Marks {
                label: "generator lagged".into(),
                seconds: vec![1],
            }],
            log_y: false,
        };
        let s = t.svg().unwrap();
        // Three polylines: offered, and p99 split by its gap (one of them a lone point).
        // (Axes are polylines too, 1 px wide; the data lines are 2 px.)
        assert_eq!(s.matches("stroke-width=\"2\" points").count(), 3, "{s}");
        assert!(s.contains("<circle"), "{s}");
        assert!(s.contains("generator lagged (1 s)"));
        assert!(s.contains("<text"));
        let empty = Timeline {
            series: vec![Series {
                name: "x".into(),
                values: vec![None, None],
            }],
            ..t
        };
        assert!(empty.svg().is_none());
    }

    #[test]
    fn buckets_count_between_steps() {
        // 10 values at 1.0, 5 at 20, 5 at 300: cumulative steps.
        let steps = [(1.0, 10), (20.0, 15), (300.0, 20)];
        let b = buckets_from_steps(&steps, 1);
        assert_eq!(
            b.iter().map(|x| x.2).collect::<Vec<_>>(),
            vec![10, 5, 5],
            "{b:?}"
        );
        assert_eq!(b.iter().map(|x| x.2).sum::<u64>(), 20);
        assert_eq!(b[0].0, 1.0);
    }
}
