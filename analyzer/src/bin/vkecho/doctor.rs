//! `vkecho doctor` (placeholder until implemented).
pub fn main(_args: &[String]) -> i32 {
    eprintln!("vkecho doctor: not implemented yet");
    2
}
