//! Which device-level Vulkan commands can reach a buffer's bytes, and what echo does about each:
//! derived from the Vulkan registry (`vk.xml`, read with `vk-parse`) and the decisions in
//! [`decisions`]. `gen-registry` writes two generated files from it:
//!
//! - `analyzer/src/registry/generated.rs`: the classification as data (every command that can
//!   reach memory, its class, whether it takes `VkDeviceMemory`, what provides it);
//! - `layer/src/hooks/aside_gen.rs`: one hook per command echo steps aside from, with the exact
//!   C signature, that reports the buffers, memory, views and descriptor sets it names and
//!   forwards the call.
//!
//! The followed commands are read from the layer's hook table (`layer/src/hooks/mod.rs`), so
//! the table that hands out hooks and the classification cannot disagree.

pub mod decisions;

use decisions::{INERT, NAMEABLE, NAMES_ONLY, NOT_LINUX, REACH_ADDRESS, REACH_HANDLES};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;

/// A parameter of a command, as far as the ABI and naming go.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ty: String,
    /// Passed by pointer (any `*`, or a fixed-size array, which decays to a pointer).
    pub pointer: bool,
    /// `len` attribute: the name of the parameter that counts the array.
    pub len: Option<String>,
}

/// One command of the registry (aliases resolved to their definition).
#[derive(Clone, Debug)]
pub struct Command {
    pub name: String,
    pub ret: String,
    pub params: Vec<Param>,
    pub action: bool,
}

/// What the registry says about a type.
#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Dispatchable,
    Handle,
    Enum,
    Bitmask64,
    Bitmask,
    Base(String),
    Struct(Vec<String>),
    FuncPointer,
    Other,
}

/// The registry, reduced to what the classification needs.
pub struct Registry {
    pub version: String,
    commands: BTreeMap<String, Command>,
    /// alias → definition
    aliases: BTreeMap<String, String>,
    kinds: HashMap<String, Kind>,
    /// structure → structures that may extend it (`structextends`)
    extenders: HashMap<String, Vec<String>>,
    /// command → features and extensions that provide it
    providers: BTreeMap<String, BTreeSet<String>>,
    /// extension → platform
    platform: HashMap<String, String>,
}

/// Where a type can lead.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Reach {
    handle: bool,
    address: bool,
}

impl Reach {
    fn any(self) -> bool {
        self.handle || self.address
    }
    fn or(self, o: Reach) -> Reach {
        Reach {
            handle: self.handle || o.handle,
            address: self.address || o.address,
        }
    }
}

fn api_ok(api: &Option<String>) -> bool {
    api.as_deref()
        .is_none_or(|a| a.split(',').any(|x| x == "vulkan"))
}

fn param_of(def: &vk_parse::NameWithType, len: &Option<String>) -> Param {
    let ty = def.type_name.clone().unwrap_or_default();
    Param {
        name: def.name.clone(),
        pointer: def.code.contains('*') || def.code.contains('['),
        ty,
        len: len.clone(),
    }
}

impl Registry {
    /// Reads `vk.xml`'s text.
    pub fn parse(xml: &str) -> Result<Registry, String> {
        let (reg, _errors) =
            vk_parse::parse_stream(xml.as_bytes()).map_err(|e| format!("{e:?}"))?;
        let mut r = Registry {
            version: String::new(),
            commands: BTreeMap::new(),
            aliases: BTreeMap::new(),
            kinds: HashMap::new(),
            extenders: HashMap::new(),
            providers: BTreeMap::new(),
            platform: HashMap::new(),
        };
        let mut disabled = BTreeSet::new();
        for child in &reg.0 {
            match child {
                vk_parse::RegistryChild::Types(types) => {
                    for t in &types.children {
                        if let vk_parse::TypesChild::Type(t) = t {
                            r.add_type(t);
                        }
                    }
                }
                vk_parse::RegistryChild::Commands(cmds) => {
                    for c in &cmds.children {
                        match c {
                            vk_parse::Command::Alias { name, alias } => {
                                r.aliases.insert(name.clone(), alias.clone());
                            }
                            vk_parse::Command::Definition(d) => {
                                if !api_ok(&d.api) {
                                    continue;
                                }
                                if let Some(a) = &d.alias {
                                    r.aliases.insert(d.proto.name.clone(), a.clone());
                                    continue;
                                }
                                let params = d
                                    .params
                                    .iter()
                                    .filter(|p| api_ok(&p.api))
                                    .map(|p| param_of(&p.definition, &p.len))
                                    .collect();
                                r.commands.insert(
                                    d.proto.name.clone(),
                                    Command {
                                        name: d.proto.name.clone(),
                                        ret: d.proto.type_name.clone().unwrap_or_default(),
                                        params,
                                        action: d
                                            .tasks
                                            .as_deref()
                                            .is_some_and(|t| t.split(',').any(|x| x == "action")),
                                    },
                                );
                            }
                            _ => {}
                        }
                    }
                }
                vk_parse::RegistryChild::Feature(f) => {
                    if !f.api.split(',').any(|a| a == "vulkan") {
                        continue;
                    }
                    r.provide(&f.name, &f.children);
                }
                vk_parse::RegistryChild::Extensions(exts) => {
                    for e in &exts.children {
                        let supported = e.supported.as_deref().unwrap_or("");
                        if !supported.split(',').any(|s| s == "vulkan") {
                            disabled.insert(e.name.clone());
                            continue;
                        }
                        if let Some(p) = &e.platform {
                            r.platform.insert(e.name.clone(), p.clone());
                        }
                        r.provide(&e.name, &e.children);
                    }
                }
                _ => {}
            }
        }
        let v: Option<Vec<&str>> = xml
            .split("VK_HEADER_VERSION_COMPLETE</name> <type>VK_MAKE_API_VERSION</type>(0, ")
            .nth(1)
            .map(|s| s.split(',').take(2).map(str::trim).collect());
        let patch: String = xml
            .split("#define <name>VK_HEADER_VERSION</name> ")
            .nth(1)
            .map(|s| s.chars().take_while(char::is_ascii_digit).collect())
            .unwrap_or_default();
        r.version = match v {
            Some(mm) if mm.len() == 2 => format!("{}.{}.{patch}", mm[0], mm[1]),
            _ => format!("?.?.{patch}"),
        };
        Ok(r)
    }

    fn provide(&mut self, by: &str, children: &[vk_parse::ExtensionChild]) {
        for c in children {
            if let vk_parse::ExtensionChild::Require { items, api, .. } = c {
                if !api_ok(api) {
                    continue;
                }
                for i in items {
                    if let vk_parse::InterfaceItem::Command { name, .. } = i {
                        self.providers
                            .entry(name.clone())
                            .or_default()
                            .insert(by.to_string());
                    }
                }
            }
        }
    }

    fn add_type(&mut self, t: &vk_parse::Type) {
        if !api_ok(&t.api) {
            return;
        }
        let cat = t.category.as_deref().unwrap_or("");
        let code = match &t.spec {
            vk_parse::TypeSpec::Code(c) => c.code.clone(),
            _ => String::new(),
        };
        let name = t.name.clone().or_else(|| {
            // handles, bitmasks and basetypes carry their name in the code's markup
            match &t.spec {
                vk_parse::TypeSpec::Code(c) => c.markup.iter().find_map(|m| match m {
                    vk_parse::TypeCodeMarkup::Name(n) => Some(n.clone()),
                    _ => None,
                }),
                _ => None,
            }
        });
        let Some(name) = name else { return };
        if let Some(a) = &t.alias {
            if let Some(k) = self.kinds.get(a).cloned() {
                self.kinds.insert(name, k);
            } else {
                self.kinds.insert(name, Kind::Other);
                // resolved later: aliases may come before their target
            }
            return;
        }
        let kind = match cat {
            "handle" if code.contains("NON_DISPATCHABLE") => Kind::Handle,
            "handle" => Kind::Dispatchable,
            "enum" => Kind::Enum,
            "bitmask" if code.contains("VkFlags64") => Kind::Bitmask64,
            "bitmask" => Kind::Bitmask,
            "basetype" => {
                let under = match &t.spec {
                    vk_parse::TypeSpec::Code(c) => c.markup.iter().find_map(|m| match m {
                        vk_parse::TypeCodeMarkup::Type(n) => Some(n.clone()),
                        _ => None,
                    }),
                    _ => None,
                };
                match under {
                    Some(u) => Kind::Base(u),
                    None => Kind::Other, // opaque platform types (ANativeWindow …)
                }
            }
            "struct" | "union" => {
                let mut members = Vec::new();
                if let vk_parse::TypeSpec::Members(ms) = &t.spec {
                    for m in ms {
                        if let vk_parse::TypeMember::Definition(d) = m {
                            if !api_ok(&d.api) {
                                continue;
                            }
                            for mk in &d.markup {
                                if let vk_parse::TypeMemberMarkup::Type(ty) = mk {
                                    members.push(ty.clone());
                                }
                            }
                        }
                    }
                }
                if let Some(ext) = &t.structextends {
                    for base in ext.split(',') {
                        self.extenders
                            .entry(base.to_string())
                            .or_default()
                            .push(name.clone());
                    }
                }
                Kind::Struct(members)
            }
            "funcpointer" => Kind::FuncPointer,
            _ => Kind::Other,
        };
        self.kinds.insert(name, kind);
    }

    /// Every name a command is known by (its own and its aliases), definition first.
    pub fn names_of(&self, def: &str) -> Vec<String> {
        let mut v = vec![def.to_string()];
        v.extend(
            self.aliases
                .iter()
                .filter(|(_, t)| self.resolve(t) == def)
                .map(|(a, _)| a.clone()),
        );
        v
    }

    fn resolve<'a>(&'a self, mut name: &'a str) -> &'a str {
        for _ in 0..8 {
            match self.aliases.get(name) {
                Some(t) => name = t,
                None => break,
            }
        }
        name
    }

    fn kind(&self, ty: &str) -> Kind {
        self.kinds.get(ty).cloned().unwrap_or(Kind::Other)
    }

    fn reach(&self, ty: &str, memo: &mut HashMap<String, Reach>) -> Reach {
        if REACH_HANDLES.contains(&ty) {
            return Reach {
                handle: true,
                address: false,
            };
        }
        if ty == REACH_ADDRESS {
            return Reach {
                handle: false,
                address: true,
            };
        }
        if let Some(r) = memo.get(ty) {
            return *r;
        }
        memo.insert(ty.to_string(), Reach::default()); // cycles through pNext end here
        let mut r = Reach::default();
        if let Kind::Struct(members) = self.kind(ty) {
            for m in &members {
                r = r.or(self.reach(m, memo));
            }
            for e in self.extenders.get(ty).cloned().unwrap_or_default() {
                r = r.or(self.reach(&e, memo));
            }
        }
        memo.insert(ty.to_string(), r);
        r
    }

    /// Whether a type is a structure (or union).
    fn is_struct(&self, ty: &str) -> bool {
        matches!(self.kind(ty), Kind::Struct(_))
    }

    /// The Rust type a by-value parameter of C type `ty` travels as (ABI only).
    fn abi(&self, ty: &str) -> Option<&'static str> {
        Some(match ty {
            "uint32_t" | "VkBool32" | "VkFlags" | "VkSampleMask" => "u32",
            "int32_t" | "int" => "i32",
            "uint64_t" | "VkDeviceSize" | "VkDeviceAddress" | "VkFlags64" => "u64",
            "int64_t" => "i64",
            "uint16_t" => "u16",
            "uint8_t" => "u8",
            "size_t" => "usize",
            "float" => "f32",
            "double" => "f64",
            "void" => "()",
            _ => match self.kind(ty) {
                Kind::Dispatchable => "usize",
                Kind::Handle => "u64",
                Kind::Enum => "i32",
                Kind::Bitmask => "u32",
                Kind::Bitmask64 => "u64",
                Kind::Base(u) => return self.abi(&u),
                _ => return None,
            },
        })
    }

    /// The command's class and what its hook needs.
    fn classify_one(
        &self,
        def: &Command,
        followed: &BTreeSet<String>,
        memo: &mut HashMap<String, Reach>,
    ) -> Option<Entry> {
        let first = def.params.first()?;
        let level = match first.ty.as_str() {
            "VkDevice" => Level::Device,
            "VkQueue" => Level::Queue,
            "VkCommandBuffer" => Level::CommandBuffer,
            _ => return None,
        };
        let names = self.names_of(&def.name);
        let mut reach = Reach::default();
        let mut opaque = false; // reaches a handle echo cannot name from the arguments
        let mut takes_memory = false;
        for p in &def.params[1..] {
            let r = self.reach(&p.ty, memo);
            reach = reach.or(r);
            if p.ty == "VkDeviceMemory"
                || (self.is_struct(&p.ty) && self.holds(&p.ty, "VkDeviceMemory"))
            {
                takes_memory = true;
            }
            let nameable = NAMEABLE.contains(&p.ty.as_str())
                && (!p.pointer
                    || p.len
                        .as_ref()
                        .is_some_and(|l| self.count_param(def, l).is_some()));
            if r.handle && !nameable {
                opaque = true;
            }
        }
        let names_only = names.iter().any(|n| NAMES_ONLY.contains(&n.as_str()));
        let bound_state = def.action && !names_only;
        if !reach.any() && !bound_state {
            return None;
        }
        let mut requires: BTreeSet<String> = BTreeSet::new();
        for n in &names {
            if let Some(p) = self.providers.get(n) {
                requires.extend(p.iter().cloned());
            }
        }
        if requires.is_empty() {
            return None; // not part of any supported feature or extension
        }
        let platform_only = requires.iter().all(|r| {
            self.platform
                .get(r)
                .is_some_and(|p| NOT_LINUX.contains(&p.as_str()))
        });
        let class = if names.iter().any(|n| followed.contains(n)) {
            Class::Followed
        } else if let Some((_, why)) = INERT.iter().find(|(n, _)| names.iter().any(|x| x == n)) {
            Class::Inert((*why).to_string())
        } else if platform_only {
            Class::Platform
        } else {
            Class::Aside
        };
        let why = if bound_state {
            "runs work over what is bound to the command buffer".to_string()
        } else {
            let mut what: Vec<&str> = Vec::new();
            for p in &def.params[1..] {
                let r = self.reach(&p.ty, memo);
                if r.any() {
                    what.push(&p.ty);
                }
            }
            what.dedup();
            format!("takes {}", what.join(", "))
        };
        Some(Entry {
            name: def.name.clone(),
            aliases: names[1..].to_vec(),
            level,
            class,
            takes_memory,
            everything: bound_state || opaque,
            requires: requires.into_iter().collect(),
            why,
        })
    }

    /// Whether a structure can hold (through members and its chain) a value of type `ty`.
    fn holds(&self, st: &str, ty: &str) -> bool {
        fn go(r: &Registry, st: &str, ty: &str, seen: &mut BTreeSet<String>) -> bool {
            if !seen.insert(st.to_string()) {
                return false;
            }
            let Kind::Struct(members) = r.kind(st) else {
                return false;
            };
            members.iter().any(|m| m == ty || go(r, m, ty, seen))
                || r.extenders
                    .get(st)
                    .is_some_and(|es| es.iter().any(|e| go(r, e, ty, seen)))
        }
        go(self, st, ty, &mut BTreeSet::new())
    }

    fn count_param<'a>(&self, def: &'a Command, len: &str) -> Option<&'a Param> {
        def.params
            .iter()
            .find(|p| p.name == len && !p.pointer && matches!(p.ty.as_str(), "uint32_t"))
    }

    /// Every device-level command that can reach memory, classified.
    pub fn classify(&self, followed: &BTreeSet<String>) -> Vec<Entry> {
        let mut memo = HashMap::new();
        self.commands
            .values()
            .filter_map(|c| self.classify_one(c, followed, &mut memo))
            .collect()
    }

    /// Every command recorded into a command buffer (`vkCmd*`, first parameter a
    /// `VkCommandBuffer`, provided by a supported feature or extension, not only on platforms no
    /// Linux driver has) that `entries` neither follows nor steps aside from: echo hands out a
    /// generated hook for each that only notes "this command buffer records real work"
    /// (`layer/src/hooks/mark.rs`), so a command buffer echo drops from a submission because it
    /// held only elided copies is known to have held nothing else. With the followed and aside
    /// hooks, every recorded command is echo's (`every_recorded_command_is_hooked`).
    pub fn marked(&self, entries: &[Entry], followed: &BTreeSet<String>) -> Vec<Entry> {
        let hooked: BTreeSet<&str> = entries
            .iter()
            .filter(|e| matches!(e.class, Class::Followed | Class::Aside | Class::Platform))
            .map(|e| e.name.as_str())
            .collect();
        let mut out = Vec::new();
        for c in self.commands.values() {
            if !c.name.starts_with("vkCmd")
                || c.params.first().map(|p| p.ty.as_str()) != Some("VkCommandBuffer")
                || hooked.contains(c.name.as_str())
            {
                continue;
            }
            let names = self.names_of(&c.name);
            if names.iter().any(|n| followed.contains(n)) {
                continue;
            }
            let mut requires: BTreeSet<String> = BTreeSet::new();
            for n in &names {
                if let Some(p) = self.providers.get(n) {
                    requires.extend(p.iter().cloned());
                }
            }
            if requires.is_empty() {
                continue;
            }
            if requires.iter().all(|r| {
                self.platform
                    .get(r)
                    .is_some_and(|p| NOT_LINUX.contains(&p.as_str()))
            }) {
                continue;
            }
            out.push(Entry {
                name: c.name.clone(),
                aliases: names[1..].to_vec(),
                level: Level::CommandBuffer,
                class: Class::Aside,
                takes_memory: false,
                everything: false,
                requires: requires.into_iter().collect(),
                why: "records work into a command buffer".into(),
            });
        }
        out
    }

    pub fn command(&self, name: &str) -> Option<&Command> {
        self.commands.get(self.resolve(name))
    }

    /// Every command name the registry knows (definitions and aliases).
    pub fn all_names(&self) -> BTreeSet<String> {
        self.commands
            .keys()
            .chain(self.aliases.keys())
            .cloned()
            .collect()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Device,
    Queue,
    CommandBuffer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Class {
    Followed,
    Inert(String),
    Aside,
    /// Only on platforms no Linux driver has: classified, no hook generated.
    Platform,
}

/// One command that can reach memory.
#[derive(Clone, Debug)]
pub struct Entry {
    pub name: String,
    pub aliases: Vec<String>,
    pub level: Level,
    pub class: Class,
    /// It can name a `VkDeviceMemory` (directly or in a structure).
    pub takes_memory: bool,
    /// Stepping aside from it means every buffer of the device: it runs work over bound state,
    /// or it names buffers through structures echo does not read.
    pub everything: bool,
    /// Core versions and extensions that provide it (any of its names).
    pub requires: Vec<String>,
    /// Why it can reach memory, for people.
    pub why: String,
}

/// The followed commands: every `module::vkName` of the layer's `hook_table!`.
pub fn followed_from_hook_table(hooks_mod_rs: &str) -> BTreeSet<String> {
    let start = hooks_mod_rs
        .find("hook_table! {")
        .expect("hook_table! invocation in hooks/mod.rs");
    let body = &hooks_mod_rs[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    body.lines()
        .filter_map(|l| {
            let l = l.trim().trim_end_matches(',');
            let (_, name) = l.split_once("::")?;
            name.starts_with("vk").then(|| name.to_string())
        })
        .collect()
}

const HEADER: &str = "// @generated by `cargo run -p echo-registry` (layer/registry) from layer/registry/vk.xml.\n// Do not edit: change layer/registry/src/decisions.rs or the hook table, then regenerate.\n";

/// `analyzer/src/registry/generated.rs`.
pub fn render_analyzer(reg: &Registry, entries: &[Entry]) -> String {
    let mut s = String::new();
    s.push_str(HEADER);
    writeln!(s, "\nuse super::{{Class, Command, Level}};\n").unwrap();
    writeln!(
        s,
        "/// The Vulkan registry version the table was made from."
    )
    .unwrap();
    writeln!(s, "pub const VK_XML_VERSION: &str = {:?};\n", reg.version).unwrap();
    writeln!(
        s,
        "/// Every device-level command that can reach memory, by definition name."
    )
    .unwrap();
    writeln!(s, "pub static COMMANDS: &[Command] = &[").unwrap();
    for e in entries {
        let class = match &e.class {
            Class::Followed => "Class::Followed".to_string(),
            Class::Inert(why) => format!("Class::Inert({why:?})"),
            Class::Aside => "Class::Aside".to_string(),
            Class::Platform => "Class::Platform".to_string(),
        };
        writeln!(
            s,
            "    Command {{ name: {:?}, aliases: &{:?}, level: Level::{:?}, class: {class}, takes_memory: {}, everything: {}, requires: &{:?}, why: {:?} }},",
            e.name, e.aliases, e.level, e.takes_memory, e.everything, e.requires, e.why
        )
        .unwrap();
    }
    writeln!(s, "];").unwrap();
    s
}

/// `layer/src/hooks/aside_gen.rs`: a hook per name (aliases included) of every aside command.
pub fn render_layer(reg: &Registry, entries: &[Entry]) -> Result<String, String> {
    let mut s = String::new();
    s.push_str(HEADER);
    s.push_str("//! The hooks of the commands echo steps aside from (docs/architecture.md, \"Complete by\n//! construction\"): each reports what it names to `aside::called`, then forwards the call.\n\n");
    s.push_str("#![allow(non_snake_case, clippy::too_many_arguments, clippy::missing_safety_doc, clippy::unused_unit, clippy::single_match)]\n\n");
    s.push_str("use super::aside::{called, Named, What};\nuse std::ffi::c_void;\n\n");
    let mut table = Vec::new();
    let mut idx = 0usize;
    for e in entries.iter().filter(|e| e.class == Class::Aside) {
        let def = reg.command(&e.name).expect("classified commands exist");
        let mut args = Vec::new();
        let mut tys = Vec::new();
        for (i, p) in def.params.iter().enumerate() {
            let t = if p.pointer {
                "*const c_void"
            } else {
                reg.abi(&p.ty).ok_or_else(|| {
                    format!(
                        "{}: no ABI type for parameter {} ({})",
                        e.name, p.name, p.ty
                    )
                })?
            };
            args.push(format!("a{i}: {t}"));
            tys.push(t);
        }
        let ret = reg
            .abi(&def.ret)
            .ok_or_else(|| format!("{}: no ABI type for its result {}", e.name, def.ret))?;
        let fallback = match def.ret.as_str() {
            "void" => "()".to_string(),
            "VkResult" => "-3 /* VK_ERROR_INITIALIZATION_FAILED */".to_string(),
            _ => "0".to_string(),
        };
        let mut named = Vec::new();
        if !e.everything {
            for (i, p) in def.params.iter().enumerate().skip(1) {
                let variant = match p.ty.as_str() {
                    "VkBuffer" => "Buffer",
                    "VkBufferView" => "View",
                    "VkDeviceMemory" => "Memory",
                    "VkDescriptorSet" => "Set",
                    _ => continue,
                };
                if p.pointer {
                    let len = p.len.as_deref().unwrap_or("");
                    let ci = def
                        .params
                        .iter()
                        .position(|q| q.name == len)
                        .expect("checked nameable");
                    named.push(format!(
                        "Named::Array(What::{variant}, a{i} as *const u64, a{ci})"
                    ));
                } else {
                    named.push(format!("Named::One(What::{variant}, a{i})"));
                }
            }
        }
        let first_is_cb = e.level == Level::CommandBuffer;
        let call: Vec<String> = (0..def.params.len()).map(|i| format!("a{i}")).collect();
        for name in std::iter::once(&e.name).chain(&e.aliases) {
            writeln!(
                s,
                "pub unsafe extern \"system\" fn {name}({}) -> {ret} {{",
                args.join(", ")
            )
            .unwrap();
            writeln!(
                s,
                "    type F = unsafe extern \"system\" fn({}) -> {ret};",
                tys.join(", ")
            )
            .unwrap();
            writeln!(
                s,
                "    match called::<F>(a0, {idx}, {first_is_cb}, {}, &[{}]) {{",
                e.everything,
                named.join(", ")
            )
            .unwrap();
            writeln!(s, "        Some(next) => next({}),", call.join(", ")).unwrap();
            writeln!(s, "        None => {fallback},").unwrap();
            writeln!(s, "    }}\n}}\n").unwrap();
            table.push((name.clone(), e.name.clone(), idx));
            idx += 1;
        }
    }
    writeln!(
        s,
        "/// Every aside hook: (name, the command's definition name, hook)."
    )
    .unwrap();
    writeln!(
        s,
        "pub const ASIDE: [(&str, &str, unsafe extern \"system\" fn()); {idx}] = ["
    )
    .unwrap();
    for (name, def, _) in &table {
        writeln!(
            s,
            "    ({name:?}, {def:?}, unsafe {{ std::mem::transmute::<*const (), unsafe extern \"system\" fn()>({name} as *const ()) }}),"
        )
        .unwrap();
    }
    writeln!(s, "];").unwrap();
    Ok(s)
}

/// `layer/src/hooks/mark_gen.rs`: a hook per name (aliases included) of every command
/// [`Registry::marked`] lists.
pub fn render_mark(reg: &Registry, marked: &[Entry]) -> Result<String, String> {
    let mut s = String::new();
    s.push_str(HEADER);
    s.push_str("//! The hooks of the recorded commands echo neither follows nor steps aside from (they cannot\n//! reach memory): each notes that its command buffer records real work (`mark::marked`), then\n//! forwards the call.\n\n");
    s.push_str("#![allow(non_snake_case, clippy::too_many_arguments, clippy::missing_safety_doc, clippy::unused_unit, clippy::single_match)]\n\n");
    s.push_str("use super::mark::marked;\nuse std::ffi::c_void;\n\n");
    let mut table = Vec::new();
    let mut idx = 0usize;
    for e in marked {
        let def = reg.command(&e.name).expect("marked commands exist");
        let mut args = Vec::new();
        let mut tys = Vec::new();
        for (i, p) in def.params.iter().enumerate() {
            let t = if p.pointer {
                "*const c_void"
            } else {
                reg.abi(&p.ty).ok_or_else(|| {
                    format!(
                        "{}: no ABI type for parameter {} ({})",
                        e.name, p.name, p.ty
                    )
                })?
            };
            args.push(format!("a{i}: {t}"));
            tys.push(t);
        }
        let ret = reg
            .abi(&def.ret)
            .ok_or_else(|| format!("{}: no ABI type for its result {}", e.name, def.ret))?;
        let fallback = match def.ret.as_str() {
            "void" => "()".to_string(),
            "VkResult" => "-3 /* VK_ERROR_INITIALIZATION_FAILED */".to_string(),
            _ => "0".to_string(),
        };
        let call: Vec<String> = (0..def.params.len()).map(|i| format!("a{i}")).collect();
        for name in std::iter::once(&e.name).chain(&e.aliases) {
            writeln!(
                s,
                "pub unsafe extern \"system\" fn {name}({}) -> {ret} {{",
                args.join(", ")
            )
            .unwrap();
            writeln!(
                s,
                "    type F = unsafe extern \"system\" fn({}) -> {ret};",
                tys.join(", ")
            )
            .unwrap();
            writeln!(s, "    match marked::<F>(a0, {idx}) {{").unwrap();
            writeln!(s, "        Some(next) => next({}),", call.join(", ")).unwrap();
            writeln!(s, "        None => {fallback},").unwrap();
            writeln!(s, "    }}\n}}\n").unwrap();
            table.push(name.clone());
            idx += 1;
        }
    }
    writeln!(s, "/// Every marking hook: (name, hook).").unwrap();
    writeln!(
        s,
        "pub const MARK: [(&str, unsafe extern \"system\" fn()); {idx}] = ["
    )
    .unwrap();
    for name in &table {
        writeln!(
            s,
            "    ({name:?}, unsafe {{ std::mem::transmute::<*const (), unsafe extern \"system\" fn()>({name} as *const ()) }}),"
        )
        .unwrap();
    }
    writeln!(s, "];").unwrap();
    Ok(s)
}

/// The generated files' paths, relative to the repository root, and their contents.
pub fn generate(root: &std::path::Path) -> Result<Vec<(std::path::PathBuf, String)>, String> {
    let xml = std::fs::read_to_string(root.join("layer/registry/vk.xml"))
        .map_err(|e| format!("layer/registry/vk.xml: {e}"))?;
    let hooks = std::fs::read_to_string(root.join("layer/src/hooks/mod.rs"))
        .map_err(|e| format!("layer/src/hooks/mod.rs: {e}"))?;
    let reg = Registry::parse(&xml)?;
    let followed = followed_from_hook_table(&hooks);
    let entries = reg.classify(&followed);
    let marked = reg.marked(&entries, &followed);
    Ok(vec![
        (
            root.join("analyzer/src/registry/generated.rs"),
            render_analyzer(&reg, &entries),
        ),
        (
            root.join("layer/src/hooks/aside_gen.rs"),
            render_layer(&reg, &entries)?,
        ),
        (
            root.join("layer/src/hooks/mark_gen.rs"),
            render_mark(&reg, &marked)?,
        ),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    fn registry() -> Registry {
        let xml = std::fs::read_to_string(root().join("layer/registry/vk.xml")).unwrap();
        Registry::parse(&xml).unwrap()
    }

    fn followed() -> BTreeSet<String> {
        followed_from_hook_table(
            &std::fs::read_to_string(root().join("layer/src/hooks/mod.rs")).unwrap(),
        )
    }

    #[test]
    fn generated_files_are_current() {
        for (path, text) in generate(&root()).unwrap() {
            let old = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                old == text,
                "{} is not current: run `cargo run -p echo-registry` and commit the result",
                path.display()
            );
        }
    }

    #[test]
    fn the_registry_is_the_newest_we_know() {
        let r = registry();
        assert!(r.version.starts_with("1.4."), "{}", r.version);
        // Debian 12's and Debian 13's registries are older: every command they name is here.
        for sys in ["/usr/share/vulkan/registry/vk.xml"] {
            let Ok(text) = std::fs::read_to_string(sys) else {
                continue;
            };
            let old = Registry::parse(&text).unwrap();
            let ours = r.all_names();
            let missing: Vec<_> = old
                .all_names()
                .into_iter()
                .filter(|n| !ours.contains(n))
                .collect();
            assert!(
                missing.is_empty(),
                "{sys} ({}) has commands layer/registry/vk.xml lacks: {missing:?}",
                old.version
            );
        }
    }

    #[test]
    fn every_name_of_a_followed_command_is_hooked() {
        // An alias left out of the hook table would reach the driver unseen: the loader hands
        // the application the next layer's pointer for it.
        let f = followed();
        for e in registry()
            .classify(&f)
            .iter()
            .filter(|e| e.class == Class::Followed)
        {
            for n in std::iter::once(&e.name).chain(&e.aliases) {
                assert!(
                    f.contains(n),
                    "{} is followed but its name {n} is not in the hook table",
                    e.name
                );
            }
        }
    }

    #[test]
    fn every_hook_table_name_is_a_registry_command() {
        let names = registry().all_names();
        for n in followed() {
            assert!(
                names.contains(&n),
                "hook table names {n}, which vk.xml does not have"
            );
        }
    }

    #[test]
    fn decisions_name_commands_the_rule_covers() {
        let r = registry();
        let entries = r.classify(&followed());
        for (n, _) in INERT {
            assert!(
                entries
                    .iter()
                    .any(|e| e.name == *n || e.aliases.iter().any(|a| a == n)),
                "INERT names {n}, which cannot reach memory by the registry's rule (remove it)"
            );
        }
        for n in NAMES_ONLY {
            let c = r
                .command(n)
                .unwrap_or_else(|| panic!("NAMES_ONLY names {n}, which vk.xml lacks"));
            assert!(
                c.action,
                "NAMES_ONLY names {n}, which is not an action command"
            );
        }
    }

    #[test]
    fn every_command_that_can_reach_memory_has_a_class() {
        // Followed ones are in the hook table, aside ones have a generated hook per name.
        let r = registry();
        let f = followed();
        let layer = render_layer(&r, &r.classify(&f)).unwrap();
        for e in r.classify(&f) {
            match &e.class {
                Class::Followed => {
                    assert!(f.contains(&e.name) || e.aliases.iter().any(|a| f.contains(a)))
                }
                Class::Aside => {
                    for n in std::iter::once(&e.name).chain(&e.aliases) {
                        assert!(
                            layer.contains(&format!("pub unsafe extern \"system\" fn {n}(")),
                            "no aside hook for {n}"
                        );
                    }
                }
                Class::Inert(why) => assert!(!why.is_empty()),
                Class::Platform => assert!(e.requires.iter().all(|x| r.platform.contains_key(x))),
            }
        }
    }

    /// Every command recorded into a command buffer is echo's on an active enforcing device:
    /// followed (hook table), stepped aside from (generated aside hook) or marked (generated
    /// marking hook). A command buffer echo drops from a submission (it held only elided
    /// copies) therefore held nothing echo did not see.
    #[test]
    fn every_recorded_command_is_hooked() {
        let r = registry();
        let f = followed();
        let entries = r.classify(&f);
        let layer = render_layer(&r, &entries).unwrap();
        let mark = render_mark(&r, &r.marked(&entries, &f)).unwrap();
        let platform: BTreeSet<&str> = entries
            .iter()
            .filter(|e| e.class == Class::Platform)
            .flat_map(|e| std::iter::once(&e.name).chain(&e.aliases))
            .map(String::as_str)
            .collect();
        let mut n = 0;
        for c in r.commands.values() {
            if !c.name.starts_with("vkCmd") || c.params[0].ty != "VkCommandBuffer" {
                continue;
            }
            for name in r.names_of(&c.name) {
                if !r.providers.contains_key(&name) || platform.contains(name.as_str()) {
                    continue;
                }
                let sig = format!("pub unsafe extern \"system\" fn {name}(");
                let how = [f.contains(&name), layer.contains(&sig), mark.contains(&sig)];
                assert_eq!(
                    how.iter().filter(|x| **x).count(),
                    1,
                    "{name}: followed, aside, marked = {how:?} (exactly one)"
                );
                n += 1;
            }
        }
        assert!(n > 300, "only {n} recorded commands");
    }

    /// A command added to the registry that can reach memory is classified (stepped aside from,
    /// with a hook), and the table committed today no longer matches: the currency test fails
    /// until it is regenerated — a new command is never invisible.
    #[test]
    fn a_planted_command_is_caught() {
        let xml = std::fs::read_to_string(root().join("layer/registry/vk.xml")).unwrap();
        let cmd = r#"<command queues="VK_QUEUE_TRANSFER_BIT" renderpass="outside" cmdbufferlevel="primary,secondary">
            <proto><type>void</type> <name>vkCmdFrobBufferECHO</name></proto>
            <param externsync="true"><type>VkCommandBuffer</type> <name>commandBuffer</name></param>
            <param><type>VkBuffer</type> <name>dstBuffer</name></param>
            <param><type>VkDeviceSize</type> <name>dstOffset</name></param>
        </command>
        "#;
        let ext = r#"<extension name="VK_ECHO_planted" number="99999" type="device" author="ECHO" supported="vulkan">
            <require><command name="vkCmdFrobBufferECHO"/></require>
        </extension>
        "#;
        let planted = xml
            .replacen("</commands>", &format!("{cmd}</commands>"), 1)
            .replacen("</extensions>", &format!("{ext}</extensions>"), 1);
        let r = Registry::parse(&planted).unwrap();
        let entries = r.classify(&followed());
        let e = entries
            .iter()
            .find(|e| e.name == "vkCmdFrobBufferECHO")
            .expect("the planted command is classified");
        assert_eq!(e.class, Class::Aside);
        assert!(
            !e.everything,
            "it names its buffer, so only that buffer leaves"
        );
        let layer = render_layer(&r, &entries).unwrap();
        assert!(layer.contains("pub unsafe extern \"system\" fn vkCmdFrobBufferECHO(a0: usize, a1: u64, a2: u64) -> ()"));
        assert!(layer.contains("Named::One(What::Buffer, a1)"));
        let committed =
            std::fs::read_to_string(root().join("analyzer/src/registry/generated.rs")).unwrap();
        assert_ne!(
            render_analyzer(&r, &entries),
            committed,
            "the currency test would not notice"
        );
        // Without the planted command, the same registry gives the committed table.
        let r0 = Registry::parse(&xml).unwrap();
        assert_eq!(render_analyzer(&r0, &r0.classify(&followed())), committed);
    }
}
