//! `vkecho analyze` (placeholder until implemented).
pub fn main(_args: &[String]) -> i32 {
    eprintln!("vkecho analyze: not implemented yet");
    2
}
