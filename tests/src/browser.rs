//! Debian's headless Chromium rendering a trapdetect HTML report: the DOM after load, the
//! console messages, and a screenshot, so a test checks what a person would see.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// What the browser made of a page.
pub struct Rendered {
    /// The DOM after load (`--dump-dom`).
    pub dom: String,
    /// Console messages (any is an error for a page that has no script).
    pub console: Vec<String>,
}

/// The Chromium binary, or `None` (with the reason printed) when it is not installed. Under CI
/// a missing browser fails the test rather than skipping it.
pub fn chromium(test: &str) -> Option<PathBuf> {
    let found = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: chromium is not installed (cargo xtask setup installs it)"
        );
        eprintln!("SKIP {test}: chromium is not installed (cargo xtask setup installs it)");
    }
    found
}

fn run(browser: &Path, profile: &Path, extra: &[String], url: &str, out: &Path, err: &Path) {
    let mut cmd = Command::new(browser);
    cmd.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        // Nothing may be fetched: every host name resolves nowhere.
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ])
    .arg(format!("--user-data-dir={}", profile.display()))
    .args(extra)
    .arg(url)
    .stdin(Stdio::null())
    // Files, not pipes: a dumped DOM is larger than a pipe's buffer.
    .stdout(std::fs::File::create(out).expect("create stdout file"))
    .stderr(std::fs::File::create(err).expect("create stderr file"));
    let mut child = cmd.spawn().expect("spawn chromium");
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            assert!(
                status.success(),
                "chromium {extra:?} failed: {}",
                std::fs::read_to_string(err).unwrap_or_default()
            );
            return;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium {extra:?} did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Loads `page` in headless Chromium (fresh profile under `work`): its DOM and console, and a
/// screenshot `width` px wide written to `png`.
pub fn render(browser: &Path, work: &Path, page: &Path, png: &Path, width: u32) -> Rendered {
    let url = format!("file://{}", page.canonicalize().expect("page").display());
    let (out, err) = (work.join("chromium.out"), work.join("chromium.err"));
    run(
        browser,
        &work.join("profile-dom"),
        &[
            "--enable-logging=stderr".into(),
            "--v=0".into(),
            "--dump-dom".into(),
        ],
        &url,
        &out,
        &err,
    );
    let dom = std::fs::read_to_string(&out).expect("dom");
    let console = std::fs::read_to_string(&err)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(":CONSOLE"))
        .map(String::from)
        .collect();
    // Tall enough for the whole report; the screenshot is cropped to the page by the caller.
    run(
        browser,
        &work.join("profile-shot"),
        &[
            format!("--window-size={width},4000"),
            format!("--screenshot={}", png.display()),
        ],
        &url,
        &out,
        &err,
    );
    Rendered { dom, console }
}

/// The inline SVG elements of a DOM, each as its source text.
pub fn svgs(dom: &str) -> Vec<&str> {
    dom.match_indices("<svg")
        .map(|(i, _)| {
            let end = dom[i..]
                .find("</svg>")
                .map(|e| i + e + 6)
                .unwrap_or(dom.len());
            &dom[i..end]
        })
        .collect()
}

/// Data drawn in a chart: lines 2 px wide, and rectangles and polygons (with some area) filled in
/// one of the palette colours (axes, grid, background and shaded seconds use other colours;
/// legend swatches are strokes).
pub fn data_marks(svg: &str) -> usize {
    let lines = svg.matches("stroke-width=\"2\" points=\"").count();
    let filled = |tag: &str| {
        svg.split(tag)
            .skip(1)
            .filter(|r| {
                let r = &r[..r.find('>').unwrap_or(r.len())];
                [
                    "#0072B2", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#E69F00",
                ]
                .iter()
                .any(|c| r.contains(&format!("fill=\"{c}\"")))
                    && (tag != "<polygon" || polygon_has_area(r))
            })
            .count()
    };
    // Bars, and stacked areas: a polygon that encloses some area (not a flat line of zeros).
    lines + filled("<rect") + filled("<polygon")
}

/// Whether a `<polygon points="x,y x,y …">` element's outline encloses a non-zero area.
fn polygon_has_area(element: &str) -> bool {
    let Some(start) = element.find("points=\"") else {
        return false;
    };
    let pts: Vec<(f64, f64)> = element[start + 8..]
        .split('"')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|p| {
            let (x, y) = p.split_once(',')?;
            Some((x.parse().ok()?, y.parse().ok()?))
        })
        .collect();
    let twice_area: f64 = pts
        .iter()
        .zip(pts.iter().cycle().skip(1))
        .map(|(a, b)| a.0 * b.1 - b.0 * a.1)
        .sum();
    twice_area.abs() >= 2.0
}
