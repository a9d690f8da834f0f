//! The [`Loader`]: reads `schema/` files, collects diagnostics, and hoists every schema's
//! `$defs` into one namespaced map with every `$ref` rewritten to `#/$defs/<GlobalName>`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{COMMON_FILE, DIALECT, collect_refs};
use crate::codegen::{Diagnostic, lint, pascal_case};

/// The input and output schema files of one `(domain, action)`.
#[derive(Debug, Default)]
pub(super) struct SchemaPair {
    pub input: Option<String>,
    pub output: Option<String>,
}

pub(super) struct Loader<'a> {
    pub root: &'a Path,
    pub diags: &'a mut Vec<Diagnostic>,
    pub defs: BTreeMap<String, Value>,
    /// Which file defined each global name, for collision messages.
    origin: BTreeMap<String, String>,
}

impl<'a> Loader<'a> {
    pub fn new(root: &'a Path, diags: &'a mut Vec<Diagnostic>) -> Loader<'a> {
        Loader {
            root,
            diags,
            defs: BTreeMap::new(),
            origin: BTreeMap::new(),
        }
    }
}

impl Loader<'_> {
    pub fn diag(&mut self, file: &str, pointer: &str, message: impl Into<String>) {
        self.diags
            .push(Diagnostic::new(display(file), pointer, message));
    }

    pub fn read_json(&mut self, file: &str) -> Option<Value> {
        let path = self.root.join(file);
        let text = match fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => {
                self.diag(file, "", format!("cannot read: {e}"));
                return None;
            }
        };
        match serde_json::from_str(&text) {
            Ok(value) => Some(value),
            Err(e) => {
                self.diag(file, "", format!("not valid JSON: {e}"));
                None
            }
        }
    }

    pub fn lint(&mut self, file: &str, value: &Value) {
        for problem in lint::lint_schema(value) {
            self.diag(file, &problem.pointer, problem.message);
        }
    }

    pub fn define(&mut self, file: &str, pointer: &str, name: String, value: Value) {
        if let Some(previous) = self.origin.get(&name) {
            let message = format!("definition `{name}` collides with the one from {previous}");
            self.diag(file, pointer, message);
            return;
        }
        self.origin.insert(name.clone(), display(file));
        self.defs.insert(name, value);
    }

    /// Hoists the `$defs` of a shared file under their own names.
    pub fn hoist_shared(&mut self, file: &str, value: &Value) {
        self.hoist(file, value, "");
    }

    /// Hoists the `$defs` of an action file under `<stem><Name>`.
    pub fn hoist_local(&mut self, file: &str, value: &Value, stem: &str) {
        self.hoist(file, value, stem);
    }

    fn hoist(&mut self, file: &str, value: &Value, prefix: &str) {
        let Some(defs) = value.get("$defs").and_then(Value::as_object) else {
            return;
        };
        for (name, def) in defs {
            if pascal_case(name) != *name {
                self.diag(
                    file,
                    &format!("/$defs/{name}"),
                    format!("definition name `{name}` must be PascalCase"),
                );
            }
            let rewritten = self.rewrite(file, def, prefix);
            self.define(
                file,
                &format!("/$defs/{name}"),
                format!("{prefix}{name}"),
                rewritten,
            );
        }
    }

    /// Adds a file's root (without `$schema`, `$id` and `$defs`) as the definition `type_name`.
    pub fn add_root(&mut self, file: &str, type_name: &str, value: &Value, prefix: &str) {
        match value.get("$schema").and_then(Value::as_str) {
            Some(DIALECT) => {}
            _ => self.diag(
                file,
                "/$schema",
                format!("schema must declare `$schema: {DIALECT}`"),
            ),
        }
        let mut root = value.clone();
        if let Some(object) = root.as_object_mut() {
            for key in ["$schema", "$id", "$defs", "title"] {
                object.remove(key);
            }
        }
        let mut rewritten = self.rewrite_root(file, &root, prefix, type_name);
        if let Some(object) = rewritten.as_object_mut() {
            object.insert("title".into(), json!(type_name));
        }
        self.define(file, "", type_name.to_string(), rewritten);
    }

    fn rewrite(&mut self, file: &str, value: &Value, prefix: &str) -> Value {
        self.rewrite_root(file, value, prefix, "")
    }

    /// Rewrites every `$ref` in `value` to the hoisted global name.
    fn rewrite_root(&mut self, file: &str, value: &Value, prefix: &str, root_name: &str) -> Value {
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, child) in map {
                    if key == "$ref" {
                        let target = child.as_str().unwrap_or_default();
                        let global = self.resolve_ref(file, target, prefix, root_name);
                        out.insert(key.clone(), json!(format!("#/$defs/{global}")));
                    } else {
                        out.insert(
                            key.clone(),
                            self.rewrite_root(file, child, prefix, root_name),
                        );
                    }
                }
                Value::Object(out)
            }
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|item| self.rewrite_root(file, item, prefix, root_name))
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    fn resolve_ref(&mut self, file: &str, target: &str, prefix: &str, root_name: &str) -> String {
        let (location, fragment) = target.split_once('#').unwrap_or((target, ""));
        let def_name = fragment.strip_prefix("/$defs/");
        if location.is_empty() {
            return match (def_name, fragment) {
                (Some(name), _) => format!("{prefix}{name}"),
                (None, "") if !root_name.is_empty() => root_name.to_string(),
                _ => {
                    self.diag(
                        file,
                        "",
                        format!("unsupported `$ref`: `{target}` (use `#/$defs/<Name>`)"),
                    );
                    String::new()
                }
            };
        }
        let resolved = normalize_path(
            &Path::new(file)
                .parent()
                .unwrap_or(Path::new(""))
                .join(location),
        );
        match (resolved.as_deref().and_then(Path::to_str), def_name) {
            (Some(COMMON_FILE), Some(name)) => name.to_string(),
            _ => {
                self.diag(file, "", format!("unsupported `$ref`: `{target}`: only local refs and refs into schema/{COMMON_FILE}#/$defs/<Name> are allowed"));
                String::new()
            }
        }
    }

    /// Every rewritten ref must name a hoisted definition.
    pub fn check_refs(&mut self, defs: &BTreeMap<String, Value>) {
        for (name, def) in defs {
            let mut refs = Vec::new();
            collect_refs(def, &mut refs);
            for r in refs {
                if !r.is_empty() && !defs.contains_key(&r) {
                    let file = self.origin.get(name).cloned().unwrap_or_default();
                    self.diags.push(Diagnostic::new(
                        file,
                        "",
                        format!("`$ref` to `{r}`, which no schema defines"),
                    ));
                }
            }
        }
    }

    /// `schema/exec/<domain>/<action>.{input,output}.json`, keyed by `(domain, action)`.
    pub fn scan_exec_schemas(&mut self) -> BTreeMap<(String, String), SchemaPair> {
        let mut pairs: BTreeMap<(String, String), SchemaPair> = BTreeMap::new();
        let exec = self.root.join("exec");
        for domain_entry in sorted_dir(&exec) {
            if !domain_entry.is_dir() {
                continue;
            }
            let domain = file_name(&domain_entry);
            for file in sorted_dir(&domain_entry) {
                let name = file_name(&file);
                let rel = format!("exec/{domain}/{name}");
                let (action, is_input) = if let Some(action) = name.strip_suffix(".input.json") {
                    (action, true)
                } else if let Some(action) = name.strip_suffix(".output.json") {
                    (action, false)
                } else {
                    self.diag(&rel, "", "unexpected file: action schemas are named <action>.input.json or <action>.output.json");
                    continue;
                };
                let pair = pairs
                    .entry((domain.clone(), action.to_string()))
                    .or_default();
                if is_input {
                    pair.input = Some(rel);
                } else {
                    pair.output = Some(rel);
                }
            }
        }
        pairs
    }
}

pub(super) fn display(file: &str) -> String {
    format!("schema/{file}")
}

pub(super) fn sorted_dir(dir: &Path) -> Vec<PathBuf> {
    let mut entries: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(_) => Vec::new(),
    };
    entries.sort();
    entries
}

pub(super) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Resolves `.` and `..` lexically: `exec/task/../../common.json` → `common.json`; `None` when the
/// path climbs out of `schema/`.
fn normalize_path(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}
