//! `manifest/VkLayer_echo.json` against Vulkan Configurator's schema, and the settings it
//! declares against the layer's own list (`echo_analyzer::settings::SETTINGS`) and
//! docs/settings.md (the README links there).
//!
//! The schema is Vulkan Configurator's `layers_schema.json` (draft-07), copied into
//! `tests/data/` so this test does not depend on anything outside the repository. Every rule is
//! checked except the vendor part of the `name` pattern (`VK_LAYER_<ORG>_<name>`): the layer is
//! called `VK_LAYER_echo`, and Vulkan Configurator only applies the schema when its
//! `validate_manifests` option is on.

use echo_analyzer::settings::{resolve, Settings, SETTINGS};
use serde_json::{json, Value};
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read_json(rel: &str) -> Value {
    let p = repo().join(rel);
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn manifest() -> Value {
    read_json("manifest/VkLayer_echo.json")
}

/// Every schema violation, as `"<instance path>: <message>"`, minus the one allowed exception:
/// the `pattern` rule on `/layer/name` when the name is exactly `VK_LAYER_echo`.
fn schema_errors(instance: &Value) -> Vec<String> {
    let schema = read_json("tests/data/layers_schema.json");
    assert_eq!(
        schema["$schema"], "http://json-schema.org/draft-07/schema#",
        "the copied schema is draft-07"
    );
    let validator = jsonschema::draft7::new(&schema).expect("the schema compiles");
    validator
        .iter_errors(instance)
        .filter(|e| {
            let allowed = e.instance_path.as_str() == "/layer/name"
                && matches!(
                    e.kind,
                    jsonschema::error::ValidationErrorKind::Pattern { .. }
                )
                && *e.instance == json!("VK_LAYER_echo");
            !allowed
        })
        .map(|e| format!("{}: {}", e.instance_path, e))
        .collect()
}

fn settings_of(m: &Value) -> Vec<Value> {
    // Flatten GROUPs and settings nested under flags, so a later reorganisation of the manifest
    // cannot hide a setting from the comparison.
    fn walk(list: &Value, out: &mut Vec<Value>) {
        for s in list.as_array().into_iter().flatten() {
            if s["type"] != "GROUP" {
                out.push(s.clone());
            }
            walk(&s["settings"], out);
            for f in s["flags"].as_array().into_iter().flatten() {
                walk(&f["settings"], out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&m["layer"]["features"]["settings"], &mut out);
    out
}

#[test]
fn manifest_passes_the_vkconfig_schema() {
    let errors = schema_errors(&manifest());
    assert!(
        errors.is_empty(),
        "manifest/VkLayer_echo.json breaks the Vulkan Configurator schema:\n{}",
        errors.join("\n")
    );
}

/// A check that cannot fail proves nothing: each of these broken manifests must be rejected,
/// and the `name` exception must cover `VK_LAYER_echo` only.
#[test]
fn schema_check_rejects_broken_manifests() {
    let good = manifest();
    type Break = fn(&mut Value);
    let cases: &[(&str, Break)] = &[
        ("no file_format_version", |m| {
            m.as_object_mut().unwrap().remove("file_format_version");
        }),
        ("bad file_format_version", |m| {
            m["file_format_version"] = json!("1.2")
        }),
        ("no description", |m| {
            m["layer"].as_object_mut().unwrap().remove("description");
        }),
        ("other layer name", |m| {
            m["layer"]["name"] = json!("VK_LAYER_foo")
        }),
        ("ENUM without flags", |m| {
            m["layer"]["features"]["settings"][0]
                .as_object_mut()
                .unwrap()
                .remove("flags");
        }),
        ("INT with a string default", |m| {
            let s = m["layer"]["features"]["settings"]
                .as_array_mut()
                .unwrap()
                .iter_mut()
                .find(|s| s["type"] == "INT")
                .unwrap();
            s["default"] = json!("2");
        }),
        ("unknown setting type", |m| {
            m["layer"]["features"]["settings"][1]["type"] = json!("FOLDER")
        }),
        ("unknown property on a setting", |m| {
            m["layer"]["features"]["settings"][1]["colour"] = json!("red")
        }),
        ("preset value of an object", |m| {
            m["layer"]["features"]["presets"][0]["settings"][0]["value"] = json!({"a": 1})
        }),
        ("preset without a label", |m| {
            m["layer"]["features"]["presets"][0]
                .as_object_mut()
                .unwrap()
                .remove("label");
        }),
        ("bad status", |m| {
            m["layer"]["status"] = json!("EXPERIMENTAL")
        }),
    ];
    for (what, break_it) in cases {
        let mut m = good.clone();
        break_it(&mut m);
        assert!(
            !schema_errors(&m).is_empty(),
            "the schema check accepted a manifest with {what}"
        );
    }
}

#[test]
fn manifest_basics_match_the_design() {
    let m = manifest();
    let l = &m["layer"];
    assert_eq!(m["file_format_version"], "1.2.0");
    assert_eq!(l["name"], "VK_LAYER_echo");
    assert_eq!(l["type"], "GLOBAL");
    assert_eq!(
        l["library_path"], "libVkLayer_echo.so",
        "the cdylib of crate vk-layer-echo"
    );
    assert_eq!(l["enable_environment"], json!({"VK_ECHO_ENABLE": "1"}));
    assert_eq!(l["disable_environment"], json!({"VK_ECHO_DISABLE": "1"}));
}

fn kind_to_types(kind: &str) -> &'static [&'static str] {
    match kind {
        "enum" => &["ENUM"],
        "int" => &["INT"],
        "path" => &[
            "LOAD_FILE",
            "SAVE_FILE",
            "LOAD_FOLDER",
            "SAVE_FOLDER",
            "STRING",
        ],
        "bool" => &["BOOL"],
        _ => &["STRING"],
    }
}

/// Every entry of SETTINGS is in the manifest with the same default, description and accepted
/// values, and every manifest setting is in SETTINGS.
#[test]
fn manifest_settings_and_layer_settings_agree() {
    let m = manifest();
    let declared = settings_of(&m);
    for info in SETTINGS {
        let s = declared
            .iter()
            .find(|s| s["key"] == info.name)
            .unwrap_or_else(|| panic!("setting '{}' is missing from the manifest", info.name));
        let ty = s["type"].as_str().unwrap();
        assert!(
            kind_to_types(info.kind).contains(&ty),
            "setting '{}': kind {} but manifest type {ty}",
            info.name,
            info.kind
        );
        let default = match &s["default"] {
            Value::String(v) => v.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => panic!("setting '{}': default {other}", info.name),
        };
        assert_eq!(default, info.default, "default of '{}'", info.name);
        assert_eq!(
            s["description"], info.description,
            "description of '{}'",
            info.name
        );
        assert_eq!(
            s["env"],
            format!("VK_ECHO_{}", info.name.to_uppercase()),
            "env of '{}'",
            info.name
        );
        if ty == "ENUM" {
            let keys: Vec<&str> = s["flags"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["key"].as_str().unwrap())
                .collect();
            let accepted: Vec<&str> = info.accepted.split('|').collect();
            assert_eq!(keys, accepted, "values of '{}'", info.name);
            assert!(keys.contains(&default.as_str()));
        }
    }
    for s in &declared {
        let key = s["key"].as_str().unwrap();
        assert!(
            SETTINGS.iter().any(|i| i.name == key),
            "the manifest declares '{key}', which the layer does not know"
        );
    }
    assert_eq!(declared.len(), SETTINGS.len(), "no duplicate keys");
}

fn no_env(_: &str) -> Option<String> {
    None
}

/// What Vulkan Configurator writes into `vk_layer_settings.txt` for the manifest's defaults
/// resolves, without a warning, to the layer's own defaults. `cache_dir` is the exception: its
/// default is written with a variable (`$XDG_CACHE_HOME/vk-echo`), and it is compared as text.
#[test]
fn manifest_defaults_resolve_to_the_layer_defaults() {
    let m = manifest();
    let file: Vec<(String, String)> = settings_of(&m)
        .iter()
        .filter(|s| s["key"] != "cache_dir")
        .map(|s| {
            let v = match &s["default"] {
                Value::String(v) => v.clone(),
                other => other.to_string(),
            };
            (s["key"].as_str().unwrap().to_string(), v)
        })
        .collect();
    let (got, warnings) = resolve(&no_env, &file, &[]);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(got, Settings::defaults(&no_env));
}

#[test]
fn presets_are_auto_profile_enforce_off_and_valid() {
    let m = manifest();
    let presets = m["layer"]["features"]["presets"].as_array().unwrap();
    let labels: Vec<&str> = presets
        .iter()
        .map(|p| p["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Auto", "Profile", "Enforce", "Off"]);
    for p in presets {
        let values: Vec<(String, String)> = p["settings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                let v = match &s["value"] {
                    Value::String(v) => v.clone(),
                    other => other.to_string(),
                };
                (s["key"].as_str().unwrap().to_string(), v)
            })
            .collect();
        let (got, warnings) = resolve(&no_env, &[], &values);
        assert!(warnings.is_empty(), "preset {}: {warnings:?}", p["label"]);
        let mode = got
            .to_pairs()
            .into_iter()
            .find(|(n, _)| n == "mode")
            .unwrap()
            .1;
        assert_eq!(mode, p["label"].as_str().unwrap().to_lowercase());
    }
}

/// docs/settings.md's table names every setting with its environment variable and default (the
/// table left the README, issue 25; the README points there).
#[test]
fn readme_and_settings_doc_list_every_setting() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("(docs/settings.md)"),
        "README.md: no link to docs/settings.md, where the settings table is"
    );
    for doc in ["docs/settings.md"] {
        let text = std::fs::read_to_string(repo().join(doc)).unwrap();
        for info in SETTINGS {
            let env = format!("VK_ECHO_{}", info.name.to_uppercase());
            let row = text
                .lines()
                .find(|l| l.starts_with(&format!("| `{}` |", info.name)))
                .unwrap_or_else(|| panic!("{doc}: no table row for setting '{}'", info.name));
            assert!(
                row.contains(&env),
                "{doc}: row of '{}' lacks {env}",
                info.name
            );
            if !info.default.is_empty() {
                assert!(
                    row.contains(&format!("`{}`", info.default)),
                    "{doc}: row of '{}' lacks its default `{}`",
                    info.name,
                    info.default
                );
            }
        }
    }
}
