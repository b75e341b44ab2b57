//! Which device-level Vulkan commands can reach a buffer's bytes, and what echo does about each:
//! derived from the Vulkan registry (`vk.xml`, read with `vk-parse`) and the decisions in
//! [`decisions`]. `gen-registry` writes the generated files from it ([`render`]):
//!
//! - `analyzer/src/registry/generated.rs`: the classification as data (every command that can
//!   reach memory, its class, whether it takes `VkDeviceMemory`, what provides it);
//! - `layer/src/hook_id.rs`: `HookId`, one per name echo hooks — followed, stepped aside from
//!   or marked — with its name and kind, and the one name lookup;
//! - `layer/src/hooks/calls_gen.rs`: the call each followed command's behaviour receives, typed
//!   by its signature;
//! - `layer/src/hooks/intercept_gen.rs`: one intercept per hooked name, with the signature from
//!   the registry in `ash`'s types ([`ash`]), through the one panic guard to the behaviour
//!   (followed), the report of what it names (aside), or straight down (marked).
//!
//! Which commands echo follows is decided in [`decisions::FOLLOWED`], with the file of
//! `layer/src/hooks/` that holds each one's behaviour.

pub mod ash;
pub mod decisions;
pub mod render;
#[cfg(test)]
mod tests;

use decisions::{
    CHANGES_BOUND, FOLLOWED, INERT, NAMEABLE, NAMES_ONLY, NOT_LINUX, REACH_ADDRESS, REACH_HANDLES,
    REVIEWED_HANDLES,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A parameter of a command, as far as the ABI and naming go.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ty: String,
    /// Passed by pointer (any `*`, or a fixed-size array, which decays to a pointer).
    pub pointer: bool,
    /// `len` attribute: the name of the parameter that counts the array.
    pub len: Option<String>,
    /// The C declaration (`const VkBufferCopy* pRegions`).
    pub code: String,
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
pub(crate) enum Kind {
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
    /// type alias → the type it names
    type_aliases: HashMap<String, String>,
    /// structure → structures that may extend it (`structextends`)
    extenders: HashMap<String, Vec<String>>,
    /// command → features and extensions that provide it
    providers: BTreeMap<String, BTreeSet<String>>,
    /// extension → platform
    platform: HashMap<String, String>,
    /// Types a supported feature or extension of a Linux platform requires.
    types_here: BTreeSet<String>,
    /// Types only extensions of other APIs (Vulkan SC) or other platforms require: they cannot
    /// reach a Linux Vulkan driver, so naming them makes no command unknown.
    types_elsewhere: BTreeSet<String>,
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
        code: def.code.clone(),
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
            type_aliases: HashMap::new(),
            extenders: HashMap::new(),
            providers: BTreeMap::new(),
            platform: HashMap::new(),
            types_here: BTreeSet::new(),
            types_elsewhere: BTreeSet::new(),
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
                    r.require_types(&f.children, true);
                    r.provide(&f.name, &f.children);
                }
                vk_parse::RegistryChild::Extensions(exts) => {
                    for e in &exts.children {
                        let supported = e.supported.as_deref().unwrap_or("");
                        if !supported.split(',').any(|s| s == "vulkan") {
                            disabled.insert(e.name.clone());
                            r.require_types(&e.children, false);
                            continue;
                        }
                        if let Some(p) = &e.platform {
                            r.platform.insert(e.name.clone(), p.clone());
                        }
                        let here = e
                            .platform
                            .as_deref()
                            .is_none_or(|p| !NOT_LINUX.contains(&p));
                        r.require_types(&e.children, here);
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

    /// Notes the types a feature or extension requires: `here` when it can reach a Linux Vulkan
    /// driver.
    fn require_types(&mut self, children: &[vk_parse::ExtensionChild], here: bool) {
        for c in children {
            if let vk_parse::ExtensionChild::Require { items, api, .. } = c {
                if !api_ok(api) {
                    continue;
                }
                for i in items {
                    if let vk_parse::InterfaceItem::Type { name, .. } = i {
                        if here {
                            self.types_here.insert(name.clone());
                        } else {
                            self.types_elsewhere.insert(name.clone());
                        }
                    }
                }
            }
        }
    }

    /// Whether a type can reach a Linux Vulkan driver (unknown types can: fail closed).
    fn type_here(&self, ty: &str) -> bool {
        self.types_here.contains(ty) || !self.types_elsewhere.contains(ty)
    }

    fn provide(&mut self, by: &str, children: &[vk_parse::ExtensionChild]) {
        for c in children {
            if let vk_parse::ExtensionChild::Require {
                items,
                api,
                depends,
                ..
            } = c
            {
                if !api_ok(api) {
                    continue;
                }
                // A block that needs one more extension (`depends="VK_EXT_descriptor_buffer"`
                // inside VK_KHR_maintenance6) is that extension's surface: a device has its
                // commands only with both, and "any of its providers" must not claim it has
                // them with the block's extension alone.
                let by = match depends.as_deref() {
                    Some(d)
                        if d.starts_with("VK_")
                            && !d.contains([',', '+', '(', ')'])
                            && !d.contains("_VERSION_") =>
                    {
                        d
                    }
                    _ => by,
                };
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
            self.type_aliases.insert(name.clone(), a.clone());
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

    /// Every name of a type: its definition's, then the aliases naming it (`VkMemoryMapInfo`,
    /// `VkMemoryMapInfoKHR`), starting from any of them.
    pub fn type_names(&self, ty: &str) -> Vec<String> {
        let mut def = ty;
        for _ in 0..8 {
            match self.type_aliases.get(def) {
                Some(t) => def = t,
                None => break,
            }
        }
        let mut v = vec![def.to_string()];
        let mut aliases: Vec<&String> = self
            .type_aliases
            .iter()
            .filter(|(_, t)| {
                let mut d = t.as_str();
                for _ in 0..8 {
                    match self.type_aliases.get(d) {
                        Some(x) => d = x,
                        None => break,
                    }
                }
                d == def
            })
            .map(|(a, _)| a)
            .collect();
        aliases.sort();
        v.extend(aliases.into_iter().cloned());
        if let Some(i) = v.iter().position(|n| n == ty) {
            // The name asked for first.
            let n = v.remove(i);
            v.insert(0, n);
        }
        v
    }

    pub(crate) fn kind(&self, ty: &str) -> Kind {
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

    /// The definition name of a type (its aliases resolved).
    fn type_def<'a>(&'a self, mut ty: &'a str) -> &'a str {
        for _ in 0..8 {
            match self.type_aliases.get(ty) {
                Some(t) => ty = t,
                None => break,
            }
        }
        ty
    }

    /// The handle types a value of `ty` can name (itself, or through structure members and
    /// every structure that may extend one), by definition name.
    fn handles_of(
        &self,
        ty: &str,
        memo: &mut HashMap<String, BTreeSet<String>>,
    ) -> BTreeSet<String> {
        let ty = self.type_def(ty).to_string();
        if let Some(h) = memo.get(&ty) {
            return h.clone();
        }
        if !self.type_here(&ty) {
            return BTreeSet::new();
        }
        memo.insert(ty.clone(), BTreeSet::new()); // cycles through pNext end here
        let mut out = BTreeSet::new();
        match self.kind(&ty) {
            Kind::Handle | Kind::Dispatchable => {
                out.insert(ty.clone());
            }
            Kind::Struct(members) => {
                for m in &members {
                    out.extend(self.handles_of(m, memo));
                }
                for e in self.extenders.get(&ty).cloned().unwrap_or_default() {
                    out.extend(self.handles_of(&e, memo));
                }
            }
            _ => {}
        }
        memo.insert(ty, out.clone());
        out
    }

    /// The handle types a command names (after its first parameter, through every structure)
    /// that are neither reach types nor reviewed ([`decisions::REVIEWED_HANDLES`]): what echo
    /// cannot tell the effect of.
    pub fn unreviewed(&self, def: &Command) -> Vec<String> {
        let mut memo = HashMap::new();
        let mut out = BTreeSet::new();
        for p in def.params.iter().skip(1) {
            out.extend(self.handles_of(&p.ty, &mut memo));
        }
        out.into_iter()
            .filter(|h| {
                !REACH_HANDLES.contains(&h.as_str())
                    && !REVIEWED_HANDLES.iter().any(|(r, _)| r == h)
            })
            .collect()
    }

    /// Whether a type is a structure (or union).
    fn is_struct(&self, ty: &str) -> bool {
        matches!(self.kind(ty), Kind::Struct(_))
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
        // Fail closed: a handle type nobody reviewed, or a command that changes bound state
        // without naming what it binds, makes the command one echo must decide about.
        let unreviewed = self.unreviewed(def);
        let changes_bound = names
            .iter()
            .any(|n| CHANGES_BOUND.iter().any(|(c, _)| c == n));
        if !reach.any() && !bound_state && unreviewed.is_empty() && !changes_bound {
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
        } else if let Some((_, w)) = CHANGES_BOUND
            .iter()
            .find(|(c, _)| names.iter().any(|n| n == c))
        {
            (*w).to_string()
        } else if !reach.any() {
            format!(
                "names {}, not reviewed as unable to change what the GPU reads or writes",
                unreviewed.join(", ")
            )
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
            everything: bound_state || opaque || changes_bound || !unreviewed.is_empty(),
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
    /// (`layer/src/hooks/intercept_gen.rs`), so a command buffer echo drops from a submission because it
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

/// The followed commands, every name of each ([`decisions::FOLLOWED`] lists definitions):
/// name → (the file of `layer/src/hooks/` holding its behaviour, its definition's name).
pub fn followed(reg: &Registry) -> std::collections::BTreeMap<String, (&'static str, String)> {
    let mut out = std::collections::BTreeMap::new();
    for (module, defs) in FOLLOWED {
        for d in *defs {
            for n in reg.names_of(d) {
                out.insert(n, (*module, d.to_string()));
            }
        }
    }
    out
}

/// The names of [`followed`].
pub fn followed_names(reg: &Registry) -> BTreeSet<String> {
    followed(reg).into_keys().collect()
}
