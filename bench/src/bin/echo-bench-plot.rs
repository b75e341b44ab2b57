//! echo-bench-plot TSV SVG: the plot of `scripts/real-libs.sh` (issue 26): speedup over the
//! staging baseline against f_copy (twin), for echo and for the zero-copy twin, one point per
//! real-library program, with the Amdahl bound 1/(1 − f) for reference. Reads the rows the
//! script writes to bench/real-libraries.tsv (program, size, f_copy, speedup echo, speedup twin,
//! ...); writes the SVG and, when a converter is installed, a PNG beside it.

#[path = "../svg.rs"]
#[allow(dead_code)]
mod svg;

use svg::{Axis, Marker, Plot, Point, Series};

/// The plot of scripts/real-libs.sh: speedup over the staging baseline against f_copy (twin).
#[derive(clap::Parser)]
#[command(name = "echo-bench-plot", version)]
struct Args {
    /// The rows scripts/real-libs.sh writes (bench/real-libraries.tsv)
    rows: std::path::PathBuf,
    /// The SVG to write (and a PNG beside it when a converter is installed)
    out: std::path::PathBuf,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let text = std::fs::read_to_string(&args.rows).unwrap_or_else(|e| {
        eprintln!("echo-bench-plot: {}: {e}", args.rows.display());
        std::process::exit(1)
    });
    let mut echo = Vec::new();
    let mut twin = Vec::new();
    let mut fmax: f64 = 0.05;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        let num = |i: usize| {
            f.get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(f64::NAN)
        };
        let (fc, se, sz) = (num(2), num(3), num(4));
        fmax = fmax.max(fc);
        echo.push(Point {
            label: Some(f[0].to_string()),
            ..Point::new(fc, se)
        });
        twin.push(Point::new(fc, sz));
    }
    let top = (fmax * 1.2).min(0.95);
    let amdahl: Vec<Point> = (0..=20)
        .map(|i| {
            let x = top * f64::from(i) / 20.0;
            Point::new(x, 1.0 / (1.0 - x))
        })
        .collect();
    let plot = Plot {
        title: "Real libraries: speedup over the staging baseline".into(),
        x_label: "f_copy (twin) = (base − twin) / base".into(),
        y_label: "speedup (×)".into(),
        x: Axis {
            log: false,
            range: Some((0.0, top)),
        },
        y: Axis {
            log: false,
            range: None,
        },
        x_ticks: None,
        series: vec![
            Series {
                name: "Amdahl 1/(1 − f)".into(),
                color: "#999999",
                marker: Marker::None,
                line: true,
                dashed: true,
                points: amdahl,
            },
            Series {
                name: "zero-copy twin".into(),
                color: "#1f77b4",
                marker: Marker::Ring,
                line: false,
                dashed: false,
                points: twin,
            },
            Series {
                name: "echo (enforce)".into(),
                color: "#d62728",
                marker: Marker::Dot,
                line: false,
                dashed: false,
                points: echo,
            },
        ],
        note: Some("written by scripts/real-libs.sh; see bench/real-libraries.md".into()),
    };
    let out = args.out.as_path();
    match svg::write_with_png(out, &plot.to_svg()) {
        Ok(_) => {}
        Err(e) => {
            eprintln!("echo-bench-plot: {e}");
            std::process::exit(1);
        }
    }
}
