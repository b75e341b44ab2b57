//! `vkecho`: the command-line front end of VK_LAYER_echo.
fn main() {
    eprintln!("vkecho: not yet implemented");
    std::process::exit(2);
}
