//! A small SVG line/scatter plot writer (no plotting dependency): linear or log axes, series with
//! markers, lines and vertical error bars, point labels, a legend.

use std::fmt::Write;

#[derive(Clone, Copy, PartialEq)]
pub enum Marker {
    None,
    Dot,
    Ring,
    Square,
}

#[derive(Clone)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Error bar (min, max), drawn when present.
    pub err: Option<(f64, f64)>,
    pub label: Option<String>,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            err: None,
            label: None,
        }
    }
}

#[derive(Clone)]
pub struct Series {
    pub name: String,
    pub color: &'static str,
    pub marker: Marker,
    pub line: bool,
    pub dashed: bool,
    pub points: Vec<Point>,
}

#[derive(Clone, Copy)]
pub struct Axis {
    pub log: bool,
    /// Fixed range; `None` fits the data.
    pub range: Option<(f64, f64)>,
}

pub struct Plot {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub x: Axis,
    pub y: Axis,
    /// Explicit x tick values (e.g. the sizes of a sweep); `None` picks ticks automatically.
    pub x_ticks: Option<Vec<f64>>,
    pub series: Vec<Series>,
    pub note: Option<String>,
}

const W: f64 = 760.0;
const H: f64 = 500.0;
const L: f64 = 78.0;
const R: f64 = 24.0;
const T: f64 = 46.0;
const B: f64 = 74.0;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn nice_step(span: f64, target: usize) -> f64 {
    let raw = span / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let nice = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn fmt_tick(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v.abs() >= 100.0 || (v.fract() == 0.0 && v.abs() >= 1.0) {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

struct Scale {
    log: bool,
    lo: f64,
    hi: f64,
    a: f64,
    b: f64,
}

impl Scale {
    fn new(axis: Axis, vals: &[f64], a: f64, b: f64) -> Scale {
        let vals: Vec<f64> = vals
            .iter()
            .copied()
            .filter(|v| v.is_finite() && (!axis.log || *v > 0.0))
            .collect();
        let (mut lo, mut hi) = axis.range.unwrap_or_else(|| {
            let lo = vals.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            if !lo.is_finite() {
                (if axis.log { 1.0 } else { 0.0 }, 1.0)
            } else if axis.log {
                (lo / 1.25, hi * 1.25)
            } else {
                let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.02).max(1e-9);
                (lo - pad, hi + pad)
            }
        });
        if hi <= lo {
            hi = lo + 1.0;
        }
        if axis.log && lo <= 0.0 {
            lo = hi / 1000.0;
        }
        Scale {
            log: axis.log,
            lo,
            hi,
            a,
            b,
        }
    }
    fn map(&self, v: f64) -> f64 {
        let t = if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.a + t * (self.b - self.a)
    }
    fn inside(&self, v: f64) -> bool {
        v.is_finite() && v >= self.lo && v <= self.hi && (!self.log || v > 0.0)
    }
    fn ticks(&self) -> Vec<f64> {
        if self.log {
            let mut v = Vec::new();
            let mut e = self.lo.log10().floor() as i32;
            while 10f64.powi(e) <= self.hi * 1.0001 {
                for m in [1.0, 2.0, 5.0] {
                    let t = m * 10f64.powi(e);
                    if t >= self.lo && t <= self.hi {
                        v.push(t);
                    }
                }
                e += 1;
            }
            v
        } else {
            let step = nice_step(self.hi - self.lo, 6);
            let mut t = (self.lo / step).ceil() * step;
            let mut v = Vec::new();
            while t <= self.hi + step * 1e-9 {
                v.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
                t += step;
            }
            v
        }
    }
}

impl Plot {
    pub fn to_svg(&self) -> String {
        let xs: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.x))
            .collect();
        let ys: Vec<f64> = self
            .series
            .iter()
            .flat_map(|s| {
                s.points.iter().flat_map(|p| {
                    let (lo, hi) = p.err.unwrap_or((p.y, p.y));
                    [p.y, lo, hi]
                })
            })
            .collect();
        let sx = Scale::new(self.x, &xs, L, W - R);
        let sy = Scale::new(self.y, &ys, H - B, T);
        let mut o = String::new();
        let _ = writeln!(
            o,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="12">"#
        );
        let _ = writeln!(o, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        let _ = writeln!(
            o,
            r#"<text x="{}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
            W / 2.0,
            esc(&self.title)
        );
        // Grid and ticks.
        let x_ticks = self.x_ticks.clone().unwrap_or_else(|| sx.ticks());
        // Labels closer than a label's width to the previous one go one line lower (31/32/33).
        let mut last_label = [f64::NEG_INFINITY; 3];
        for t in x_ticks.iter().filter(|t| sx.inside(**t)) {
            let x = sx.map(*t);
            let row = (0..3).find(|r| x - last_label[*r] >= 24.0).unwrap_or(3); // 3: no room, grid line only
            if row < 3 {
                last_label[row] = x;
            }
            let label = if row < 3 { fmt_tick(*t) } else { String::new() };
            let _ = writeln!(
                o,
                r##"<line x1="{x:.1}" y1="{T}" x2="{x:.1}" y2="{:.1}" stroke="#e4e4e4"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
                H - B,
                H - B + 16.0 + row.min(2) as f64 * 11.0,
                label
            );
        }
        for t in sy.ticks() {
            let y = sy.map(t);
            let _ = writeln!(
                o,
                r##"<line x1="{L}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e4e4e4"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
                W - R,
                L - 6.0,
                y + 4.0,
                fmt_tick(t)
            );
        }
        let _ = writeln!(
            o,
            r#"<rect x="{L}" y="{T}" width="{:.1}" height="{:.1}" fill="none" stroke="black"/>"#,
            W - R - L,
            H - B - T
        );
        let _ = writeln!(
            o,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            (L + W - R) / 2.0,
            H - B + 54.0,
            esc(&self.x_label)
        );
        let _ = writeln!(
            o,
            r#"<text transform="translate(20,{:.1}) rotate(-90)" text-anchor="middle">{}</text>"#,
            (T + H - B) / 2.0,
            esc(&self.y_label)
        );
        if let Some(n) = &self.note {
            let _ = writeln!(
                o,
                r##"<text x="{L}" y="{:.1}" font-size="10" fill="#555">{}</text>"##,
                H - 4.0,
                esc(n)
            );
        }
        let _ = writeln!(
            o,
            r#"<clipPath id="area"><rect x="{L}" y="{T}" width="{:.1}" height="{:.1}"/></clipPath>"#,
            W - R - L,
            H - B - T
        );
        // Series.
        let mut placed: Vec<(f64, f64, f64)> = Vec::new();
        for s in &self.series {
            let pts: Vec<&Point> = s
                .points
                .iter()
                .filter(|p| p.x.is_finite() && p.y.is_finite())
                .collect();
            if s.line && pts.len() > 1 {
                let d: Vec<String> = pts
                    .iter()
                    .map(|p| format!("{:.1},{:.1}", sx.map(p.x), sy.map(p.y)))
                    .collect();
                let _ = writeln!(
                    o,
                    r#"<polyline clip-path="url(#area)" fill="none" stroke="{}" stroke-width="2"{} points="{}"/>"#,
                    s.color,
                    if s.dashed {
                        r#" stroke-dasharray="6,4""#
                    } else {
                        ""
                    },
                    d.join(" ")
                );
            }
            for p in &pts {
                let (x, y) = (sx.map(p.x), sy.map(p.y));
                if let Some((lo, hi)) = p.err {
                    if lo.is_finite() && hi.is_finite() {
                        let (a, b) = (sy.map(lo), sy.map(hi));
                        let _ = writeln!(
                            o,
                            r#"<path clip-path="url(#area)" d="M{x:.1},{a:.1}V{b:.1}M{:.1},{a:.1}h8M{:.1},{b:.1}h8" stroke="{}" stroke-width="1.2" fill="none"/>"#,
                            x - 4.0,
                            x - 4.0,
                            s.color
                        );
                    }
                }
                if !(sx.inside(p.x) && sy.inside(p.y)) {
                    continue;
                }
                marker(&mut o, s.marker, x, y, s.color);
                if let Some(l) = &p.label {
                    // Move a label down past the ones already placed nearby.
                    let w = l.chars().count() as f64 * 6.2;
                    let mut ly = y - 6.0;
                    while placed.iter().any(|&(px, py, pw)| {
                        (ly - py).abs() < 12.0 && x + 7.0 < px + pw && px < x + 7.0 + w
                    }) {
                        ly += 12.0;
                    }
                    placed.push((x + 7.0, ly, w));
                    let _ = writeln!(
                        o,
                        r#"<text x="{:.1}" y="{:.1}" font-size="11" fill="{}">{}</text>"#,
                        x + 7.0,
                        ly,
                        s.color,
                        esc(l)
                    );
                }
            }
        }
        // Legend (top left, inside the frame).
        let named: Vec<&Series> = self.series.iter().filter(|s| !s.name.is_empty()).collect();
        let lw = named
            .iter()
            .map(|s| s.name.chars().count())
            .max()
            .unwrap_or(0) as f64
            * 6.6
            + 44.0;
        if !named.is_empty() {
            let _ = writeln!(
                o,
                r##"<rect x="{:.1}" y="{:.1}" width="{lw:.1}" height="{:.1}" fill="white" fill-opacity="0.9" stroke="#999"/>"##,
                L + 8.0,
                T + 8.0,
                named.len() as f64 * 18.0 + 8.0
            );
        }
        for (i, s) in named.iter().enumerate() {
            let y = T + 22.0 + i as f64 * 18.0;
            let x = L + 16.0;
            if s.line {
                let _ = writeln!(
                    o,
                    r#"<line x1="{x:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2"{}/>"#,
                    x + 22.0,
                    s.color,
                    if s.dashed {
                        r#" stroke-dasharray="6,4""#
                    } else {
                        ""
                    }
                );
            }
            marker(&mut o, s.marker, x + 11.0, y, s.color);
            let _ = writeln!(
                o,
                r#"<text x="{:.1}" y="{:.1}">{}</text>"#,
                x + 30.0,
                y + 4.0,
                esc(&s.name)
            );
        }
        o.push_str("</svg>\n");
        o
    }
}

fn marker(o: &mut String, m: Marker, x: f64, y: f64, color: &str) {
    let _ = match m {
        Marker::None => Ok(()),
        Marker::Dot => writeln!(
            o,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="{color}"/>"#
        ),
        Marker::Ring => writeln!(
            o,
            r#"<circle cx="{x:.1}" cy="{y:.1}" r="4.5" fill="white" stroke="{color}" stroke-width="2"/>"#
        ),
        Marker::Square => writeln!(
            o,
            r#"<rect x="{:.1}" y="{:.1}" width="8" height="8" fill="{color}"/>"#,
            x - 4.0,
            y - 4.0
        ),
    };
}

/// Writes `svg` to `path` (.svg) and, when a converter is installed (`rsvg-convert`, else
/// ImageMagick's `convert`), a PNG next to it. Returns the PNG path if one was made.
pub fn write_with_png(
    path: &std::path::Path,
    svg: &str,
) -> Result<Option<std::path::PathBuf>, String> {
    std::fs::write(path, svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let png = path.with_extension("png");
    let _ = std::fs::remove_file(&png);
    let tries: [(&str, Vec<String>); 2] = [
        (
            "rsvg-convert",
            vec![
                "-o".into(),
                png.display().to_string(),
                path.display().to_string(),
            ],
        ),
        (
            "convert",
            vec![path.display().to_string(), png.display().to_string()],
        ),
    ];
    for (prog, args) in tries {
        let ok = std::process::Command::new(prog)
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ok && png.exists() {
            return Ok(Some(png));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plot_is_well_formed_and_escapes_text() {
        let p = Plot {
            title: "a < b & c".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            x: Axis {
                log: true,
                range: None,
            },
            y: Axis {
                log: false,
                range: None,
            },
            x_ticks: Some(vec![1.0, 4.0, 16.0]),
            series: vec![Series {
                name: "s".into(),
                color: "red",
                marker: Marker::Dot,
                line: true,
                dashed: false,
                points: vec![
                    Point::new(1.0, 2.0),
                    Point::new(16.0, f64::NAN),
                    Point {
                        err: Some((1.0, 3.0)),
                        label: Some("p".into()),
                        ..Point::new(4.0, 2.5)
                    },
                ],
            }],
            note: None,
        };
        let s = p.to_svg();
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert!(s.contains("a &lt; b &amp; c"));
        assert!(!s.contains("NaN") && !s.contains("inf"));
    }
}
