//! The settings parser and resolver never panic on any input: a `vk_layer_settings.txt` text, and
//! the same bytes as environment values and application settings (`VK_ECHO_*`,
//! `VkLayerSettingsCreateInfoEXT`), including path expansion of `~` and `$VAR`.
#![no_main]
use echo_analyzer::settings::{expand_path, parse_settings_file, parse_u64, resolve};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut warnings = Vec::new();
    let file = parse_settings_file(&text, &mut warnings);
    // Every line's value also arrives through the environment and the application.
    let values: Vec<String> = text.lines().map(str::to_string).collect();
    let env = |k: &str| -> Option<String> {
        let i = k.bytes().fold(0usize, |a, b| a.wrapping_mul(31).wrapping_add(b as usize));
        values.get(i % values.len().max(1)).cloned()
    };
    let app: Vec<(String, String)> = file.iter().rev().cloned().collect();
    let (s, _) = resolve(&env, &file, &app);
    let _ = s.to_pairs();
    let _ = resolve(&|_| None, &[], &file);
    for v in &values {
        let _ = parse_u64(v);
        let _ = expand_path(v, &env);
    }
});
