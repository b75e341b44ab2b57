//! Progress on stderr for long work, through `indicatif`: `vkecho demo` and `vkecho calibrate`,
//! echo-bench's samples, sweep and per-call rounds. A crate of its own, which only the two
//! command-line crates depend on: the layer's dependency graph never holds `indicatif` (a feature
//! of the analyzer would, in a workspace build, be unified into the layer's copy too).
//!
//! The bar is drawn only when stderr is a terminal (and `VKECHO_NO_PROGRESS` is unset): piped
//! into a file, a test or a log, it is hidden and stderr carries exactly the lines it carried
//! without it. Lines meant for the log go through [`say`], which prints them above the bar.

pub use indicatif::ProgressBar;
use indicatif::{ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Duration;

/// Whether a bar would be drawn here.
pub fn visible() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("VKECHO_NO_PROGRESS").is_none()
}

/// A bar of `len` steps labelled `prefix` ("vkecho demo", "echo-bench"), the count followed by
/// `unit` (" runs", or "" for none), hidden unless [`visible`].
pub fn bar(len: u64, prefix: &str, unit: &str) -> ProgressBar {
    let target = if visible() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(len), target);
    let template = format!(
        "{{spinner}} {{prefix}} [{{bar:30}}] {{pos}}/{{len}}{unit}, {{elapsed}} {{wide_msg}}"
    );
    pb.set_style(
        ProgressStyle::with_template(&template)
            .expect("a valid template")
            .progress_chars("=> "),
    );
    pb.set_prefix(prefix.to_string());
    if !pb.is_hidden() {
        pb.enable_steady_tick(Duration::from_millis(120));
    }
    pb
}

/// `eprintln!` that does not tear a drawn bar (and prints the same line when it is hidden).
pub fn say(pb: &ProgressBar, line: &str) {
    pb.suspend(|| eprintln!("{line}"));
}

#[cfg(test)]
mod tests {
    #[test]
    fn hidden_when_stderr_is_not_a_terminal() {
        // Under `cargo test` stderr is captured or piped; either way not a bar's place when
        // it is not a terminal.
        if !super::visible() {
            assert!(super::bar(3, "test", " runs").is_hidden());
        }
    }

    #[test]
    fn the_template_takes_every_unit() {
        for unit in ["", " runs", " steps"] {
            let pb = super::bar(2, "x", unit);
            pb.inc(1);
            assert_eq!(pb.position(), 1);
        }
    }
}
