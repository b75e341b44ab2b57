//! `vkecho`: the command-line front end of VK_LAYER_echo.
//!
//! Each subcommand lives in its own module with `pub fn main(args: &[String]) -> i32`.

mod analyze;
mod cache;
mod calibrate;
mod demo;
mod doctor;
mod install;
mod launch;
mod paths;
mod plan;
mod profile;
mod report;
mod run;
mod show;

const USAGE: &str = "\
vkecho — VK_LAYER_echo: remove host↔device self-copies on unified-memory Vulkan devices

usage: vkecho <command> [options]

commands:
  doctor [--json]                         explain this machine: loader, drivers, devices, layer install
  install [--system] [--explicit]         install the layer manifest (user dir by default)
  uninstall [--system] [--explicit]       remove an installed manifest
  profile [--trace F] -- CMD              run CMD with the layer recording a trace; print a summary
  analyze TRACE [-o PLAN] [--json]        turn a profile trace into a plan, with every decision explained
  run [--plan PLAN] [--stats F] -- CMD    run CMD enforcing PLAN, or in auto mode without --plan
                                          (enforce the cached plan, else profile and write it);
                                          print which plan and what it saved
  calibrate [--trials N] [--metric FIELD] --plan PLAN -- CMD
                                          time CMD without and with the plan; keep the plan only if faster
  cache list|show NAME|clear [NAME...]    auto mode's cache: entries, one entry's plan, remove
  plan export NAME [-o F] | import F      move a plan to another board of the same model, driver
                                          and memory table (import checks this machine's devices)
  report [-o FILE]                        one archive to send with a problem: doctor, the cache's
                                          plans and run records, versions, the last run's warnings
  demo [--size-mib N] [--iters N] [--samples a,b]
                                          profile, analyze and enforce every sample; print a results table
  show TRACE [--plan P] [--stats S] [--format html|perfetto] [-o F]
                                          one run as a self-contained HTML page (or Perfetto trace)
  help                                    this text
";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        eprint!("{USAGE}");
        std::process::exit(2);
    };
    let rest = &args[1..];
    let code = match cmd.as_str() {
        "doctor" => doctor::main(rest),
        "install" => install::main(rest, false),
        "uninstall" => install::main(rest, true),
        "analyze" => analyze::main(rest),
        "profile" => profile::main(rest),
        "run" => run::main(rest),
        "calibrate" => calibrate::main(rest),
        "demo" => demo::main(rest),
        "cache" => cache::main(rest),
        "plan" => plan::main(rest),
        "report" => report::main(rest),
        "show" => show::main(rest),
        "help" | "-h" | "--help" => {
            print!("{USAGE}");
            0
        }
        other => {
            eprintln!("vkecho: unknown command '{other}'\n");
            eprint!("{USAGE}");
            2
        }
    };
    std::process::exit(code);
}

/// Write a file only its owner can read or write (traces and plans, DESIGN §8 hardening).
pub fn write_private(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    // `mode` applies only to a new file; an existing one is narrowed too.
    use std::os::unix::fs::PermissionsExt;
    f.set_permissions(std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("cannot restrict {}: {e}", path.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}
