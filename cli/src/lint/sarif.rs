//! `vkecho lint --format sarif`: SARIF 2.1.0 as code-scanning services take it, one result per
//! diagnostic. The types are `serde-sarif`'s (generated from the OASIS schema); what is ours is
//! the mapping: a place with a file and line is a physical location with a region (relative
//! paths against `%SRCROOT%`); one without is the module's file plus a logical location naming
//! the function; notes with a place are related locations; the notes' text, the change to make
//! included, is the message's second part; the figures (the site's copies and bytes in the
//! profiled run, each pair as `--format json` gives it) are the result's properties.

use super::diag::{Diagnostic, RULE};
use super::sites::Place;
use serde_sarif::sarif::{
    ArtifactLocation, Location, LogicalLocation, Message, MultiformatMessageString,
    PhysicalLocation, PropertyBag, Region, ReportingConfiguration, ReportingDescriptor, Result,
    ResultLevel, Run, Sarif, Tool, ToolComponent,
};
use std::collections::BTreeMap;

/// The schema URI a SARIF 2.1.0 log names.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";

fn message(text: String) -> Message {
    Message::builder().text(text).build()
}

/// A URI for a file path: absolute paths as `file://` URIs, relative ones as they are (resolved
/// against `%SRCROOT%`), characters URIs do not allow percent-encoded.
fn uri(path: &str) -> (String, bool) {
    let mut out = String::new();
    for b in path.bytes() {
        let c = b as char;
        if c.is_ascii_alphanumeric() || "/-._~+@:!$&'()*,;=".contains(c) {
            out.push(c);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if path.starts_with('/') {
        (format!("file://{out}"), true)
    } else {
        (out, false)
    }
}

fn location(p: &Place, note: Option<&str>) -> Location {
    let logical = p.function.as_ref().map(|f| {
        vec![LogicalLocation::builder()
            .fully_qualified_name(f.clone())
            .kind("function")
            .build()]
    });
    let physical = match (&p.file, p.line) {
        (Some(file), Some(line)) => {
            let (u, absolute) = uri(file);
            let art = if absolute {
                ArtifactLocation::builder().uri(u).build()
            } else {
                ArtifactLocation::builder()
                    .uri(u)
                    .uri_base_id("%SRCROOT%")
                    .build()
            };
            let region = match p.column {
                Some(c) => Region::builder()
                    .start_line(line as i64)
                    .start_column(c as i64)
                    .build(),
                None => Region::builder().start_line(line as i64).build(),
            };
            PhysicalLocation::builder()
                .artifact_location(art)
                .region(region)
                .build()
        }
        _ => {
            let path = p.module_path.clone().unwrap_or_else(|| p.module.clone());
            let (u, _) = uri(&path);
            PhysicalLocation::builder()
                .artifact_location(ArtifactLocation::builder().uri(u).build())
                .build()
        }
    };
    let mut props = BTreeMap::new();
    props.insert("module".to_string(), serde_json::json!(p.module));
    props.insert(
        "moduleOffset".to_string(),
        serde_json::json!(format!("{:#x}", p.offset)),
    );
    let bag = PropertyBag::builder().additional_properties(props).build();
    let l = Location::builder()
        .physical_location(physical)
        .properties(bag);
    match (logical, note) {
        (Some(lg), Some(n)) => l
            .logical_locations(lg)
            .message(message(n.to_string()))
            .build(),
        (Some(lg), None) => l.logical_locations(lg).build(),
        (None, Some(n)) => l.message(message(n.to_string())).build(),
        (None, None) => l.build(),
    }
}

fn result(d: &Diagnostic) -> Result {
    let mut text = d.message.clone();
    for n in &d.notes {
        text.push('\n');
        if let Some(p) = &n.location {
            text.push_str(&format!("{}: ", p.prefix()));
        }
        text.push_str(&n.message);
    }
    let related: Vec<Location> = d
        .notes
        .iter()
        .filter_map(|n| n.location.as_ref().map(|p| location(p, Some(&n.message))))
        .collect();
    let mut props = BTreeMap::new();
    props.insert(
        "copies".to_string(),
        serde_json::json!(d.pairs.iter().map(|p| p.copies).sum::<u64>()),
    );
    props.insert(
        "bytes".to_string(),
        serde_json::json!(d.pairs.iter().map(|p| p.bytes).sum::<u64>()),
    );
    props.insert(
        "pairs".to_string(),
        serde_json::to_value(&d.pairs).unwrap_or_default(),
    );
    let r = Result::builder()
        .rule_id(d.rule.clone())
        .rule_index(0)
        .level(ResultLevel::Warning)
        .message(message(text))
        .locations(vec![location(&d.location, None)])
        .properties(PropertyBag::builder().additional_properties(props).build());
    if related.is_empty() {
        r.build()
    } else {
        r.related_locations(related).build()
    }
}

/// The SARIF log of a lint run.
pub fn log(diags: &[Diagnostic]) -> Sarif {
    let rule = ReportingDescriptor::builder()
        .id(RULE)
        .name("UnifiedMemorySelfCopy")
        .short_description(
            MultiformatMessageString::builder()
                .text("A staging buffer copied to or from a device buffer on a unified-memory device")
                .build(),
        )
        .full_description(
            MultiformatMessageString::builder()
                .text("On a unified-memory Vulkan device (integrated GPUs, Jetson, Raspberry Pi, Mali, Adreno, Apple, lavapipe) host-visible staging memory and device-local memory are the same DRAM: a copy between a staging buffer and a device buffer moves bytes from DRAM to the same DRAM. VK_LAYER_echo saw the program make such copies; the device buffer can be allocated from a DEVICE_LOCAL|HOST_VISIBLE memory type and mapped instead.")
                .build(),
        )
        .help(
            MultiformatMessageString::builder()
                .text("Each result names the change that removes the copy at the source (the last notes of its message); docs/lint.md in VK_LAYER_echo explains the rule.")
                .build(),
        )
        .default_configuration(
            ReportingConfiguration::builder()
                .level(serde_json::json!("warning"))
                .build(),
        )
        .build();
    let driver = ToolComponent::builder()
        .name("vkecho lint")
        .full_name(format!(
            "vkecho lint (VK_LAYER_echo {})",
            env!("CARGO_PKG_VERSION")
        ))
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .rules(vec![rule])
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(diags.iter().map(result).collect::<Vec<_>>())
        .build();
    Sarif::builder()
        .schema(SCHEMA)
        .version(serde_json::json!("2.1.0"))
        .runs(vec![run])
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_encoded() {
        assert_eq!(uri("src/a b.rs"), ("src/a%20b.rs".to_string(), false));
        assert_eq!(
            uri("/usr/include/vk.h"),
            ("file:///usr/include/vk.h".to_string(), true)
        );
    }
}
