//! The benchmark's line/scatter plots, drawn by `plotters` (SVG backend, no font rasterizing: the
//! text goes into the SVG as `<text>`): linear or log axes, series with markers, lines (solid or
//! dashed) and vertical error bars, point labels, a legend.
//!
//! What is this file's own and not plotters': the plot description below (the callers fill it),
//! fitting the axis ranges to the data, the tick values of a log axis (1, 2, 5 per decade) and
//! the explicit ticks of a sweep, clipping lines to a fixed range (plotters draws outside its
//! plotting area), putting crowded tick labels (31/32/33 MiB on a log axis) on a second and third
//! line, and moving point labels past each other; docs/third-party.md says why.

use plotters::coord::combinators::{IntoLogRange, LogCoord};
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::element::{Drawable, PointCollection};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_backend::DrawingErrorKind;
use std::ops::Range;

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

const W: u32 = 760;
const H: u32 = 500;
/// The font the SVG names (the viewer picks the first it has).
const FONT: &str = "DejaVu Sans, Helvetica, Arial, sans-serif";
/// plotters writes `font-size` as its size / 1.24: these give 12 px and 15 px text.
const TEXT: f64 = 12.0 * 1.24;
const TITLE: f64 = 15.0 * 1.24;
const GRID: RGBColor = RGBColor(0xe4, 0xe4, 0xe4);

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

/// `#rrggbb` (or a few names) as a plotters colour.
fn color(c: &str) -> RGBColor {
    let hex = |i: usize| u8::from_str_radix(c.get(i..i + 2).unwrap_or("00"), 16).unwrap_or(0);
    match c {
        "red" => RED,
        "blue" => BLUE,
        "black" => BLACK,
        _ if c.len() == 7 && c.starts_with('#') => RGBColor(hex(1), hex(3), hex(5)),
        _ => BLACK,
    }
}

/// The range an axis shows: the plot's, or the data's with a margin.
fn fit(axis: Axis, vals: &[f64]) -> (f64, f64) {
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
    (lo, hi)
}

/// One axis as plotters coordinates: plotters' linear or logarithmic mapping, with the ticks
/// this plot wants (a sweep's sizes; 1, 2, 5 per decade on a log axis; plotters' own on a
/// linear one).
#[derive(Clone)]
struct AxisCoord {
    lin: RangedCoordf64,
    log: bool,
    ticks: Option<Vec<f64>>,
    lo: f64,
    hi: f64,
}

impl AxisCoord {
    fn new(axis: Axis, (lo, hi): (f64, f64), ticks: Option<Vec<f64>>) -> AxisCoord {
        AxisCoord {
            lin: (lo..hi).into(),
            log: axis.log,
            ticks,
            lo,
            hi,
        }
    }
    fn inside(&self, v: f64) -> bool {
        v.is_finite() && v >= self.lo && v <= self.hi && (!self.log || v > 0.0)
    }
    /// The position along the axis, 0 at `lo` and 1 at `hi` (for clipping).
    fn t(&self, v: f64) -> f64 {
        if self.log {
            (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        }
    }
    fn at(&self, t: f64) -> f64 {
        if self.log {
            (self.lo.ln() + t * (self.hi.ln() - self.lo.ln())).exp()
        } else {
            self.lo + t * (self.hi - self.lo)
        }
    }
}

impl Ranged for AxisCoord {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        if self.log {
            LogCoord::from((self.lo..self.hi).log_scale()).map(v, limit)
        } else {
            self.lin.map(v, limit)
        }
    }
    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if let Some(t) = &self.ticks {
            return t.iter().copied().filter(|v| self.inside(*v)).collect();
        }
        if !self.log {
            return self.lin.key_points(hint);
        }
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
    }
    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

/// The pieces of a polyline inside the plotting area (plotters does not clip): each segment
/// is cut where it leaves the x and y ranges, in the axes' own (linear or log) measure.
fn clip(points: &[(f64, f64)], x: &AxisCoord, y: &AxisCoord) -> Vec<Vec<(f64, f64)>> {
    let mut pieces: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for w in points.windows(2) {
        let (a, b) = ((x.t(w[0].0), y.t(w[0].1)), (x.t(w[1].0), y.t(w[1].1)));
        // Liang–Barsky on the unit square.
        let (dx, dy) = (b.0 - a.0, b.1 - a.1);
        let (mut t0, mut t1) = (0.0f64, 1.0f64);
        let mut visible = a.0.is_finite() && a.1.is_finite() && b.0.is_finite() && b.1.is_finite();
        for (p, q) in [(-dx, a.0), (dx, 1.0 - a.0), (-dy, a.1), (dy, 1.0 - a.1)] {
            if !visible {
                break;
            }
            if p == 0.0 {
                visible = q >= 0.0;
            } else {
                let r = q / p;
                if p < 0.0 {
                    t0 = t0.max(r);
                } else {
                    t1 = t1.min(r);
                }
                visible = t0 <= t1;
            }
        }
        if !visible {
            if cur.len() > 1 {
                pieces.push(std::mem::take(&mut cur));
            }
            cur.clear();
            continue;
        }
        // Unclipped ends stay exactly the data's.
        let pt = |t: f64| {
            if t <= 0.0 {
                w[0]
            } else if t >= 1.0 {
                w[1]
            } else {
                (x.at(a.0 + t * dx), y.at(a.1 + t * dy))
            }
        };
        let (p0, p1) = (pt(t0), pt(t1));
        if cur.is_empty() || t0 > 0.0 {
            if cur.len() > 1 {
                pieces.push(std::mem::take(&mut cur));
            }
            cur = vec![p0];
        }
        cur.push(p1);
        if t1 < 1.0 {
            pieces.push(std::mem::take(&mut cur));
        }
    }
    if cur.len() > 1 {
        pieces.push(cur);
    }
    pieces
}

type Chart<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<AxisCoord, AxisCoord>>;
type Failed = DrawingAreaErrorKind<std::io::Error>;

/// A series' marker at one point (and, in the legend, its line through it): a small plotters
/// element of our own, drawn with the backend's circles, rectangles and lines.
struct Mark<C> {
    at: C,
    marker: Marker,
    color: RGBColor,
    /// In the legend: the series' line, `Some(dashed)`.
    line: Option<bool>,
}

impl<'a, C> PointCollection<'a, C> for &'a Mark<C> {
    type Point = &'a C;
    type IntoIter = std::iter::Once<&'a C>;
    fn point_iter(self) -> Self::IntoIter {
        std::iter::once(&self.at)
    }
}

impl<C, DB: DrawingBackend> Drawable<DB> for Mark<C> {
    fn draw<I: Iterator<Item = (i32, i32)>>(
        &self,
        mut pos: I,
        b: &mut DB,
        _: (u32, u32),
    ) -> Result<(), DrawingErrorKind<DB::ErrorType>> {
        let Some((x, y)) = pos.next() else {
            return Ok(());
        };
        let c = self.color;
        match self.line {
            Some(true) => {
                for x0 in [x - 11, x - 1, x + 9] {
                    b.draw_line((x0, y), ((x0 + 6).min(x + 11), y), &c.stroke_width(2))?;
                }
            }
            Some(false) => b.draw_line((x - 11, y), (x + 11, y), &c.stroke_width(2))?,
            None => {}
        }
        match self.marker {
            Marker::None => {}
            Marker::Dot => b.draw_circle((x, y), 5, &c.filled(), true)?,
            Marker::Ring => {
                b.draw_circle((x, y), 5, &WHITE.filled(), true)?;
                b.draw_circle((x, y), 5, &c.stroke_width(2), false)?;
            }
            Marker::Square => b.draw_rect((x - 4, y - 4), (x + 4, y + 4), &c.filled(), true)?,
        }
        Ok(())
    }
}

impl Plot {
    pub fn to_svg(&self) -> String {
        let mut out = String::new();
        if let Err(e) = self.draw(&mut out) {
            // Drawing into a string only fails on a plotters bug; say so in the picture's place.
            return format!(
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\"><text x=\"10\" y=\"20\">plot failed: {}</text></svg>\n",
                e.to_string().replace('<', "&lt;").replace('&', "&amp;")
            );
        }
        out
    }

    fn draw(&self, out: &mut String) -> Result<(), Failed> {
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
        let xc = AxisCoord::new(self.x, fit(self.x, &xs), self.x_ticks.clone());
        let yc = AxisCoord::new(self.y, fit(self.y, &ys), None);
        let font = |size: f64| (FONT, size).into_font();
        let root = SVGBackend::with_string(out, (W, H)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart: Chart = ChartBuilder::on(&root)
            .caption(&self.title, font(TITLE).style(FontStyle::Bold))
            .margin_top(8)
            .margin_right(24)
            .margin_left(8)
            .margin_bottom(if self.note.is_some() { 18 } else { 6 })
            .x_label_area_size(62)
            .y_label_area_size(70)
            .build_cartesian_2d(xc.clone(), yc.clone())?;

        // Tick labels closer than a label's width to the previous one go one line lower
        // (31/32/33 on a log axis); a fourth crowded one gets its grid line only.
        let ticks = xc.key_points(12usize);
        let mut last = [i32::MIN / 2; 3];
        let mut rows: Vec<(f64, usize)> = Vec::new();
        for t in ticks.iter().copied() {
            let px = chart.backend_coord(&(t, yc.lo)).0;
            let row = (0..3).find(|r| px - last[*r] >= 24).unwrap_or(3);
            if row < 3 {
                last[row] = px;
            }
            rows.push((t, row));
        }
        let row_of = |v: f64| rows.iter().find(|r| r.0 == v).map_or(0, |r| r.1);
        let x_fmt = |v: &f64| {
            if row_of(*v) == 0 {
                fmt_tick(*v)
            } else {
                String::new()
            }
        };
        // A linear axis' labels carry the decimals its ticks need to differ (1.05, 1.10).
        let y_points = yc.key_points(8usize);
        let y_decimals = (!yc.log)
            .then(|| {
                (0..=6usize).find(|d| {
                    let labels: Vec<String> = y_points.iter().map(|v| format!("{v:.d$}")).collect();
                    labels.windows(2).all(|w| w[0] != w[1])
                })
            })
            .flatten()
            .filter(|d| *d > 0);
        let y_fmt = |v: &f64| match y_decimals {
            Some(d) if *v != 0.0 => format!("{v:.d$}"),
            _ => fmt_tick(*v),
        };
        chart
            .configure_mesh()
            .x_labels(12)
            .y_labels(8)
            .x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .bold_line_style(GRID)
            .light_line_style(TRANSPARENT)
            .axis_style(BLACK)
            .label_style(font(TEXT))
            .axis_desc_style(font(TEXT))
            .x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .draw()?;
        let below = font(TEXT)
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Top));
        for &(t, row) in rows.iter().filter(|r| r.1 == 1 || r.1 == 2) {
            let (px, py) = chart.backend_coord(&(t, yc.lo));
            root.draw(&Text::new(
                fmt_tick(t),
                (px, py + 8 + row as i32 * 14),
                below.clone(),
            ))?;
        }
        // The frame around the plotting area.
        chart.draw_series(std::iter::once(Rectangle::new(
            [(xc.lo, yc.lo), (xc.hi, yc.hi)],
            BLACK.stroke_width(1),
        )))?;
        if let Some(n) = &self.note {
            root.draw(&Text::new(
                n.clone(),
                (78, H as i32 - 4),
                font(10.0 * 1.24)
                    .color(&RGBColor(0x55, 0x55, 0x55))
                    .pos(Pos::new(HPos::Left, VPos::Bottom)),
            ))?;
        }

        let mut placed: Vec<(i32, i32, i32)> = Vec::new();
        for s in &self.series {
            let c = color(s.color);
            let pts: Vec<&Point> = s
                .points
                .iter()
                .filter(|p| p.x.is_finite() && p.y.is_finite())
                .collect();
            let line_style = c.stroke_width(2);
            if s.line && pts.len() > 1 {
                let xy: Vec<(f64, f64)> = pts.iter().map(|p| (p.x, p.y)).collect();
                for piece in clip(&xy, &xc, &yc) {
                    if s.dashed {
                        chart.draw_series(DashedLineSeries::new(piece, 6, 4, line_style))?;
                    } else {
                        chart.draw_series(LineSeries::new(piece, line_style))?;
                    }
                }
            }
            for p in &pts {
                if let Some((lo, hi)) = p.err {
                    if lo.is_finite() && hi.is_finite() && xc.inside(p.x) {
                        let (lo, hi) = (lo.max(yc.lo), hi.min(yc.hi));
                        if lo <= hi {
                            let bar = c.stroke_width(1);
                            let cap = |y: f64| {
                                EmptyElement::at((p.x, y))
                                    + PathElement::new(vec![(-4, 0), (4, 0)], bar)
                            };
                            chart.draw_series(std::iter::once(PathElement::new(
                                vec![(p.x, lo), (p.x, hi)],
                                bar,
                            )))?;
                            chart.draw_series([cap(lo), cap(hi)])?;
                        }
                    }
                }
                if !(xc.inside(p.x) && yc.inside(p.y)) {
                    continue;
                }
                if s.marker != Marker::None {
                    chart.draw_series(std::iter::once(Mark {
                        at: (p.x, p.y),
                        marker: s.marker,
                        color: c,
                        line: None,
                    }))?;
                }
                if let Some(l) = &p.label {
                    // Move a label down past the ones already placed nearby.
                    let (px, py) = chart.backend_coord(&(p.x, p.y));
                    let w = (l.chars().count() as f64 * 6.2) as i32;
                    let mut ly = py - 6;
                    while placed.iter().any(|&(qx, qy, qw)| {
                        (ly - qy).abs() < 12 && px + 7 < qx + qw && qx < px + 7 + w
                    }) {
                        ly += 12;
                    }
                    placed.push((px + 7, ly, w));
                    root.draw(&Text::new(
                        l.clone(),
                        (px + 7, ly),
                        font(11.0 * 1.24)
                            .color(&c)
                            .pos(Pos::new(HPos::Left, VPos::Bottom)),
                    ))?;
                }
            }
            if !s.name.is_empty() {
                let (marker, line, dashed) = (s.marker, s.line, s.dashed);
                chart
                    .draw_series(std::iter::empty::<EmptyElement<(f64, f64), SVGBackend>>())?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| Mark {
                        at: (x + 11, y),
                        marker,
                        color: c,
                        line: line.then_some(dashed),
                    });
            }
        }
        // Legend (top left, inside the frame).
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .margin(8)
            .legend_area_size(30)
            .label_font(font(TEXT))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(0x99, 0x99, 0x99))
            .draw()?;
        root.present()?;
        Ok(())
    }
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
        // What the plot shows: its axes' names, the sweep's ticks, the legend, the point label.
        for text in [
            ">\nx\n<", ">\ny\n<", ">\n1\n<", ">\n4\n<", ">\n16\n<", ">\ns\n<", ">\np\n<",
        ] {
            assert!(s.contains(text), "{text:?} missing:\n{s}");
        }
    }

    #[test]
    fn lines_are_clipped_to_a_fixed_range() {
        let x = AxisCoord::new(
            Axis {
                log: false,
                range: None,
            },
            (0.0, 1.0),
            None,
        );
        let y = AxisCoord::new(
            Axis {
                log: true,
                range: None,
            },
            (1.0, 100.0),
            None,
        );
        let pieces = clip(&[(0.0, 10.0), (0.5, 1000.0), (1.0, 10.0)], &x, &y);
        assert_eq!(pieces.len(), 2, "{pieces:?}");
        assert_eq!(pieces[0][0], (0.0, 10.0));
        assert!((pieces[0][1].1 - 100.0).abs() < 1e-6 && (pieces[0][1].0 - 0.25).abs() < 1e-6);
        assert!((pieces[1][0].1 - 100.0).abs() < 1e-6 && (pieces[1][0].0 - 0.75).abs() < 1e-6);
        assert_eq!(*pieces[1].last().unwrap(), (1.0, 10.0));
        assert_eq!(
            clip(&[(0.0, 0.5), (1.0, 0.5)], &x, &y),
            Vec::<Vec<(f64, f64)>>::new()
        );
        assert_eq!(clip(&[(0.1, 2.0), (0.2, 3.0), (0.3, 4.0)], &x, &y).len(), 1);
    }
}
