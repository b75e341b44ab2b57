//! `vkecho install` / `vkecho uninstall` (placeholder until implemented).
pub fn main(_args: &[String], _uninstall: bool) -> i32 {
    eprintln!("vkecho install: not implemented yet");
    2
}
