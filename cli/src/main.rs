//! `vkecho`: the command-line front end of VK_LAYER_echo.
//!
//! The command line is parsed by clap (derive): each subcommand lives in its own module with its
//! `Args` and `pub fn main(args: &Args) -> i32`.

mod analyze;
mod cache;
mod calibrate;
mod demo;
mod doctor;
mod files;
mod install;
mod launch;
mod lint;
mod paths;
mod plan;
mod profile;
mod report;
mod run;
mod selftest;
mod show;

use clap::{CommandFactory, Parser, Subcommand};

/// vkecho — VK_LAYER_echo: remove host↔device self-copies on unified-memory Vulkan devices.
#[derive(Parser)]
#[command(
    name = "vkecho",
    version,
    arg_required_else_help = true,
    after_help = "`vkecho <command> --help` explains one command; docs/usage.md explains them all."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Explain this machine: loader, drivers, devices, layer install
    Doctor(doctor::Args),
    /// Install the layer manifest (user directory by default)
    Install(install::InstallArgs),
    /// Remove an installed manifest
    Uninstall(install::UninstallArgs),
    /// Run CMD with the layer recording a trace; print a summary
    Profile(profile::Args),
    /// Turn a profile trace into a plan, with every decision explained
    Analyze(analyze::Args),
    /// Where the program copies memory to itself on a unified-memory device, as compiler
    /// diagnostics (text, JSON, SARIF) for its authors and their CI
    Lint(lint::Args),
    /// Run CMD enforcing PLAN, or in auto mode without --plan (enforce the cached plan, else
    /// profile and write it); print which plan and what it saved
    Run(run::Args),
    /// Time CMD without and with the plan; keep the plan only if faster
    Calibrate(calibrate::Args),
    /// Auto mode's cache: entries, one entry's plan, remove
    #[command(subcommand, after_help = cache::AFTER_HELP)]
    Cache(cache::Command),
    /// Move a plan to another board of the same model, driver and memory table (import checks
    /// this machine's devices)
    #[command(subcommand, after_help = plan::AFTER_HELP)]
    Plan(plan::Command),
    /// One archive to send with a problem: doctor, the cache's plans and run records, versions,
    /// the last run's warnings
    Report(report::Args),
    /// Profile, analyze and enforce every sample; print a results table
    Demo(demo::Args),
    /// One run as a self-contained HTML page (or a Perfetto trace)
    Show(show::Args),
    /// Check echo on this machine with built-in workloads: a verdict, and a report bundle to
    /// send (needs only vkecho and the layer)
    Selftest(selftest::Args),
    /// Internal: one workload run of `vkecho selftest` (started by selftest itself)
    #[command(hide = true)]
    SelftestWorker(selftest::worker::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout
    Completions {
        /// The shell to write the script for
        shell: clap_complete::Shell,
    },
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Doctor(a) => doctor::main(a),
        Command::Install(a) => install::main(&a.to_opts(), false),
        Command::Uninstall(a) => install::main(&a.to_opts(), true),
        Command::Analyze(a) => analyze::main(a),
        Command::Profile(a) => profile::main(a),
        Command::Lint(a) => lint::main(a),
        Command::Run(a) => run::main(a),
        Command::Calibrate(a) => calibrate::main(a),
        Command::Demo(a) => demo::main(a),
        Command::Cache(c) => cache::main(c),
        Command::Plan(c) => plan::main(c),
        Command::Report(a) => report::main(a),
        Command::Show(a) => show::main(a),
        Command::Selftest(a) => selftest::main(a),
        Command::SelftestWorker(a) => selftest::worker::main(a),
        Command::Completions { shell } => {
            clap_complete::generate(
                *shell,
                &mut Cli::command(),
                "vkecho",
                &mut std::io::stdout(),
            );
            0
        }
    };
    std::process::exit(code);
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
