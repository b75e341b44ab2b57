//! echo-bench-startup: what the layer's start-up spends on the program's identity (the trace's and
//! plan's `context.exe_id`, DESIGN §5), the way it reads it now against the way it read it before
//! commit da2e818.
//!
//!   echo-bench-startup [--rounds N] [FILE...]     (default: this executable)
//!
//! Per file, N paired rounds (order alternating): *before*, the whole file read and its build-id
//! found in memory (`elf_build_id(&std::fs::read(f))`); *now*, `exe_identity(f)`, which reads the
//! ELF header, the program headers and the note segments. Both must give the same identity.
//! Prints per file the bytes each way reads, the median microseconds of each and the median
//! per-round ratio with its range. The page cache is warm (a started program's executable is).

use echo_analyzer::context::{elf_build_id, exe_identity};
use std::path::PathBuf;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let mut rounds = 21usize;
    let mut files: Vec<PathBuf> = vec![];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args
                .next()
                .and_then(|n| n.parse().ok())
                .filter(|&n| n > 0)
                .unwrap_or_else(|| {
                    eprintln!("echo-bench-startup: --rounds needs a positive number");
                    std::process::exit(2)
                });
        } else {
            files.push(a.into());
        }
    }
    if files.is_empty() {
        files.push(std::env::current_exe().expect("this executable"));
    }
    println!("| file | size | read before | read now | before (µs) | now (µs) | before/now, median [min–max] |");
    println!("|---|---:|---:|---:|---:|---:|---|");
    for f in &files {
        let size = match std::fs::metadata(f) {
            Ok(m) => m.len(),
            Err(e) => {
                eprintln!("echo-bench-startup: {}: {e}", f.display());
                std::process::exit(2)
            }
        };
        let before = || match std::fs::read(f).ok().and_then(|b| elf_build_id(&b)) {
            Some(id) => format!("build-id:{id}"),
            None => "none".to_string(),
        };
        let now = || exe_identity(f);
        let id = now();
        if !id.starts_with("build-id:") || before() != id {
            eprintln!(
                "echo-bench-startup: {}: no build-id, or the two ways differ ({} / {id})",
                f.display(),
                before()
            );
            std::process::exit(1);
        }
        let (mut tb, mut tn, mut ratio) = (vec![], vec![], vec![]);
        for r in 0..rounds {
            let time = |g: &dyn Fn() -> String| {
                let t = Instant::now();
                std::hint::black_box(g());
                t.elapsed().as_secs_f64() * 1e6
            };
            let (b, n) = if r % 2 == 0 {
                let b = time(&before);
                (b, time(&now))
            } else {
                let n = time(&now);
                (time(&before), n)
            };
            tb.push(b);
            tn.push(n);
            ratio.push(b / n);
        }
        let lo = ratio.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = ratio.iter().cloned().fold(0.0, f64::max);
        println!(
            "| {} | {size} | {size} | {} | {:.0} | {:.0} | {:.0}× [{lo:.0}–{hi:.0}] |",
            f.display(),
            header_bytes(f),
            median(tb),
            median(tn),
            median(ratio),
        );
    }
}

/// The bytes `exe_identity` reads: the identification, header, program headers and notes.
fn header_bytes(f: &std::path::Path) -> u64 {
    let b = std::fs::read(f).unwrap_or_default();
    let rd = |o: usize, n: usize| -> u64 {
        b.get(o..o + n).map_or(0, |s| {
            s.iter().rev().fold(0u64, |v, &x| (v << 8) | u64::from(x))
        })
    };
    if b.len() < 0x40 || b[4] != 2 || b[5] != 1 {
        return 0; // the count is for 64-bit little-endian files
    }
    let (phoff, phentsize, phnum) = (
        rd(0x20, 8) as usize,
        rd(0x36, 2) as usize,
        rd(0x38, 2) as usize,
    );
    let mut n = 6 + 0x40 + (phentsize * phnum) as u64;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        if rd(ph, 4) == 4 {
            n += rd(ph + 32, 8);
            if elf_build_id(&b[..(rd(ph + 8, 8) + rd(ph + 32, 8)).min(b.len() as u64) as usize])
                .is_some()
            {
                break;
            }
        }
    }
    n
}
