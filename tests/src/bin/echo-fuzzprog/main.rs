//! echo-fuzzprog: random legal Vulkan programs, echo against none (issue 45;
//! docs/fuzzing-programs.md).
//!
//!   echo-fuzzprog caps                          what this device offers the generator (JSON)
//!   echo-fuzzprog device                        its API version and extensions (JSON)
//!   echo-fuzzprog gen --seed N [--caps JSON]    the program of seed N (JSON)
//!   echo-fuzzprog run (--seed N | --file P) [--cover FILE]
//!                                               runs it: one line per host read, then the digest
//!   echo-fuzzprog fuzz --seconds S --seed N --driver D --out DIR [--jobs J] [--validate]
//!                                               the oracle loop (campaign.rs)
//!   echo-fuzzprog check --file P --driver D --out DIR [--shrink]
//!                                               one program through every mode (a corpus test)

mod campaign;
mod exec;

use clap::{Parser, Subcommand};
use echo_tests::fuzzprog::{gen, Caps, Program};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "echo-fuzzprog",
    about = "Random legal Vulkan programs, echo against none"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print what the first device offers the generator.
    Caps,
    /// Print the first device's API version and extensions (JSON; the coverage by class).
    Device,
    /// Print the program of a seed.
    Gen {
        #[arg(long)]
        seed: u64,
        /// Caps as JSON (default: this device's).
        #[arg(long)]
        caps: Option<String>,
    },
    /// Run a program: one line per host read, then `digest`.
    Run {
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long)]
        file: Option<PathBuf>,
        /// Write the Vulkan commands the run called there.
        #[arg(long)]
        cover: Option<PathBuf>,
    },
    /// Generate and run programs in every mode until the time is up.
    Fuzz(campaign::FuzzArgs),
    /// One program file through every mode (exit 1 on a divergence).
    Check(campaign::CheckArgs),
    /// Whether a program file is valid (the model's first refusal otherwise).
    Validate { file: PathBuf },
}

fn main() {
    let cli = Cli::parse();
    let code = match cli.cmd {
        Command::Caps => match unsafe { exec::Exec::new() } {
            Ok(e) => {
                println!("{}", serde_json::to_string(&e.caps).unwrap());
                unsafe { e.finish() };
                0
            }
            Err((c, m)) => {
                eprintln!("echo-fuzzprog: {m}");
                c
            }
        },
        Command::Device => match unsafe { exec::device_info() } {
            Ok((api, extensions)) => {
                let v = serde_json::json!({ "api_version": api, "extensions": extensions });
                println!("{v}");
                0
            }
            Err((c, m)) => {
                eprintln!("echo-fuzzprog: {m}");
                c
            }
        },
        Command::Gen { seed, caps } => {
            let caps: Caps = match caps {
                Some(j) => serde_json::from_str(&j).expect("--caps: JSON of Caps"),
                None => match unsafe { exec::Exec::new() } {
                    Ok(e) => {
                        let c = e.caps;
                        unsafe { e.finish() };
                        c
                    }
                    Err((c, m)) => {
                        eprintln!("echo-fuzzprog: {m}");
                        std::process::exit(c);
                    }
                },
            };
            println!("{}", gen::generate(seed, caps).to_json());
            0
        }
        Command::Run { seed, file, cover } => run(seed, file, cover),
        Command::Fuzz(a) => campaign::fuzz(a),
        Command::Check(a) => campaign::check(a),
        Command::Validate { file } => {
            let text = std::fs::read_to_string(&file).expect("the program file");
            let p = Program::from_json(&text).expect("a program");
            match echo_tests::fuzzprog::model::validate(&p) {
                Ok(_) => {
                    println!("valid: {} ops", p.ops.len());
                    0
                }
                Err((i, e)) => {
                    println!("op {i}: {e}");
                    1
                }
            }
        }
    };
    std::process::exit(code);
}

fn run(seed: Option<u64>, file: Option<PathBuf>, cover: Option<PathBuf>) -> i32 {
    let mut e = match unsafe { exec::Exec::new() } {
        Ok(e) => e,
        Err((c, m)) => {
            eprintln!("echo-fuzzprog: {m}");
            return c;
        }
    };
    let p = match (seed, file) {
        (Some(s), None) => gen::generate(s, e.caps),
        (None, Some(f)) => {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|err| panic!("{}: {err}", f.display()));
            let p =
                Program::from_json(&text).unwrap_or_else(|err| panic!("{}: {err}", f.display()));
            if !caps_fit(&p.caps, &e.caps) {
                eprintln!("echo-fuzzprog: this device lacks what the program was generated for");
                return 3;
            }
            p
        }
        _ => {
            eprintln!("echo-fuzzprog run: --seed or --file");
            return 2;
        }
    };
    let r = unsafe { e.run(&p) };
    for l in &e.lines {
        println!("{l}");
    }
    if let Some(path) = cover {
        let mut names = e.cover.clone();
        if r.is_ok() {
            names.extend(e.finish_names());
        }
        let text: String = names.iter().map(|c| format!("{c}\n")).collect();
        let _ = std::fs::write(path, text);
    }
    match r {
        Ok(()) => {
            unsafe { e.finish() };
            0
        }
        Err((c, m)) => {
            eprintln!("echo-fuzzprog: {m}");
            c
        }
    }
}

/// Whether a device with `have` can run a program generated for `want`.
pub fn caps_fit(want: &Caps, have: &Caps) -> bool {
    (!want.push_descriptor || have.push_descriptor)
        && (!want.uab_storage || have.uab_storage)
        && (!want.device_address || have.device_address)
        && (!want.map2 || have.map2)
        && (!want.maint6 || have.maint6)
        && (!want.partially_bound || have.partially_bound)
        && (!want.shader_object || have.shader_object)
        && want.image_size == have.image_size
        && want.image_align == have.image_align
}
