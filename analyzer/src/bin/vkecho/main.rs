//! `vkecho`: the command-line front end of VK_LAYER_echo.
//!
//! Each subcommand lives in its own module with `pub fn main(args: &[String]) -> i32`.

mod analyze;
mod doctor;
mod install;

const USAGE: &str = "\
vkecho — VK_LAYER_echo: remove host↔device self-copies on unified-memory Vulkan devices

usage: vkecho <command> [options]

commands:
  doctor [--json]                         explain this machine: loader, drivers, devices, layer install
  install [--system] [--explicit]         install the layer manifest (user dir by default)
  uninstall [--system]                    remove an installed manifest
  analyze TRACE [-o PLAN] [--json]        turn a profile trace into a plan, with every decision explained
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
