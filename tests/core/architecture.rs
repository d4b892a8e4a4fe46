//! docs/architecture.md's rules, checked against the source: every
//! top-level module sits in one layer, imports run down (or across one
//! layer), never up, and the files of a folder import each other without
//! circles. A new module, or an import against the direction, fails here
//! until the page and this table say where it goes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, from the store up to the command line, with their modules
/// (the table docs/architecture.md shows). A module may import from its
/// own layer and the layers below it.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "plain data and frozen formats",
        &[
            "duration",
            "ident",
            "policy",
            "service",
            "placement",
            "registry",
            "heartbeat",
            "response",
        ],
    ),
    (
        "store",
        &[
            "store",
            "store_check",
            "bucket_copy",
            "upload",
            "object_copy",
        ],
    ),
    ("config", &["config"]),
    ("fleet state", &["database", "root", "store_trust"]),
    ("plugin wing", &["plugin"]),
    (
        "work",
        &[
            "idle",
            "events",
            "outside_compactor",
            "copier",
            "compaction_code",
            "hooks",
            "metrics",
            "mirror",
            "services",
            "ownership",
            "probes",
        ],
    ),
    ("node", &["daemon"]),
    (
        "commands and facade",
        &[
            "lib",
            "error",
            "mirror_ops",
            "status",
            "plugin_check",
            "config_check",
            "scaffold",
            "schema",
            "testing",
            "demo",
        ],
    ),
    ("edge", &["cli", "endpoint", "main"]),
];

/// Upward imports the page lists as known debts, with why they remain.
const KNOWN_UPWARD: &[(&str, &str)] = &[
    // The fleet root and the node return the crate's one `Error`; it
    // should split per layer (docs/architecture.md, "Known debts").
    ("root", "error"),
    ("daemon", "error"),
];

/// The plugin wing depends on nothing above the store but plain data.
const PLUGIN_WING_MAY_USE: &[&str] = &[
    "plugin",
    "ident",
    "policy",
    "service",
    "duration",
    "store",
    "upload",
    "object_copy",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Whether a file is a module's tests kept beside it: a `tests.rs` that
/// the module owning its folder declares as `#[cfg(test)] mod tests;`.
/// That module is the folder's `mod.rs`, or `<folder>.rs` beside the
/// folder (as `src/root.rs` owns `src/root/`).
fn is_test_file(path: &Path) -> bool {
    let declares_tests = |owner: PathBuf| {
        std::fs::read_to_string(owner).is_ok_and(|text| text.contains("#[cfg(test)]\nmod tests;"))
    };
    path.file_name().is_some_and(|name| name == "tests.rs")
        && (declares_tests(path.with_file_name("mod.rs"))
            || declares_tests(path.parent().unwrap().with_extension("rs")))
}

/// A file's code without its tests (tests may reach anywhere, whether
/// inline in `#[cfg(test)] mod tests` or in a test file) and without
/// comments.
fn code(path: &Path) -> String {
    if is_test_file(path) {
        return String::new();
    }
    let text = std::fs::read_to_string(path).unwrap();
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level module a file belongs to.
fn top_module(path: &Path) -> String {
    let relative = path.strip_prefix(src()).unwrap();
    let first = relative.components().next().unwrap().as_os_str();
    first.to_string_lossy().trim_end_matches(".rs").to_string()
}

/// The top-level modules a file names as `crate::<module>`; the crate
/// root's re-exports count as the module they come from.
fn crate_imports(code: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let name: String = code[at + 7..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let module = match name.as_str() {
            "Service" => "service",
            "HumanDuration" => "duration",
            "Error" => "error",
            // The crate's version constants: build facts, not a module.
            "SLEET_VERSION" | "SLATEDB_VERSION" => continue,
            other => other,
        };
        found.insert(module.to_string());
    }
    found
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, modules)| modules.contains(&module))
}

/// Every top-level import, by importing module.
fn imports() -> BTreeMap<String, BTreeSet<String>> {
    let mut by_module: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for file in rust_files(&src()) {
        let module = top_module(&file);
        let used = crate_imports(&code(&file));
        let entry = by_module.entry(module.clone()).or_default();
        entry.extend(used.into_iter().filter(|m| *m != module));
    }
    by_module
}

#[test]
fn every_module_sits_in_a_layer_and_imports_run_down() {
    let mut problems = Vec::new();
    for (module, used) in imports() {
        let Some(layer) = layer_of(&module) else {
            problems.push(format!("{module} is in no layer of docs/architecture.md"));
            continue;
        };
        for target in used {
            let Some(target_layer) = layer_of(&target) else {
                continue; // reported as its own module
            };
            let known = KNOWN_UPWARD.contains(&(module.as_str(), target.as_str()));
            if target_layer > layer && !known {
                problems.push(format!(
                    "{module} ({}) imports {target} ({}), a layer above it",
                    LAYERS[layer].0, LAYERS[target_layer].0
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn config_is_plain_data_and_the_plugin_wing_depends_on_nothing_above_it() {
    // The config layer uses plain data and the store's URL rules, not the
    // store layer's uploads or copies, nor any layer that uses it.
    let plain_data = LAYERS[0].1;
    let config_may_use: Vec<&str> = plain_data
        .iter()
        .copied()
        .chain(["config", "store"])
        .collect();
    let imports = imports();
    for (module, allowed) in [
        ("config", &config_may_use[..]),
        ("plugin", PLUGIN_WING_MAY_USE),
    ] {
        let beyond: Vec<&String> = imports[module]
            .iter()
            .filter(|m| !allowed.contains(&m.as_str()))
            .collect();
        assert!(beyond.is_empty(), "{module} imports {beyond:?}");
    }
}

/// The sibling files a file of `folder` imports (`super::x` from a file
/// beside `x`, or `crate::<folder>::x`).
fn sibling_imports(folder: &Path, file: &Path, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let code = code(file);
    let module_path = folder
        .strip_prefix(src())
        .unwrap()
        .to_string_lossy()
        .replace('/', "::");
    let mut found = BTreeSet::new();
    for prefix in ["super::".to_string(), format!("crate::{module_path}::")] {
        for (at, _) in code.match_indices(&prefix) {
            // `super::super::` reaches out of the folder: not a sibling.
            let rest = &code[at + prefix.len()..];
            let mut names: Vec<String> = Vec::new();
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for part in group[..end].split(',') {
                    names.push(part.trim().split("::").next().unwrap_or("").to_string());
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
            found.extend(names.into_iter().filter(|n| siblings.contains(n)));
        }
    }
    found
}

#[test]
fn the_files_of_a_folder_import_each_other_without_circles() {
    let mut folders: BTreeSet<PathBuf> = BTreeSet::new();
    for file in rust_files(&src()) {
        folders.insert(file.parent().unwrap().to_path_buf());
    }
    let mut circles = Vec::new();
    for folder in folders.into_iter().filter(|f| *f != src()) {
        // Siblings: the folder's files and subfolders, not its mod.rs
        // (the parent, which declares and re-exports them).
        let mut siblings = BTreeMap::new();
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_string_lossy().to_string();
            let file = if path.is_dir() {
                path.join("mod.rs")
            } else {
                path.clone()
            };
            if name != "mod" && file.is_file() {
                siblings.insert(name, file);
            }
        }
        let names: BTreeSet<String> = siblings.keys().cloned().collect();
        let graph: BTreeMap<String, BTreeSet<String>> = siblings
            .iter()
            .map(|(name, file)| {
                let mut used = sibling_imports(&folder, file, &names);
                used.remove(name);
                (name.clone(), used)
            })
            .collect();
        if let Some(circle) = find_circle(&graph) {
            circles.push(format!("{}: {}", folder.display(), circle.join(" -> ")));
        }
    }
    assert!(circles.is_empty(), "{circles:#?}");
}

/// A cycle of `graph`, as the names along it, if there is one.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node.to_string());
            return Some(circle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(circle) = visit(next, graph, path, done) {
                return Some(circle);
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(node, graph, &mut Vec::new(), &mut done))
}

/// The check can fail: a circle is found, and an upward import would be.
#[test]
fn the_checks_catch_what_they_are_about() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("pass", vec!["verify"]),
        ("verify", vec!["points"]),
        ("points", vec!["pass"]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(
        find_circle(&graph).unwrap(),
        ["pass", "verify", "points", "pass"]
    );
    assert!(layer_of("config") < layer_of("plugin"));
    assert!(is_test_file(&src().join("idle/tests.rs")));
    assert!(!is_test_file(&src().join("idle/mod.rs")));
    // A folder owned by `<folder>.rs` beside it, as `src/root/` is.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("owner")).unwrap();
    let tests = dir.path().join("owner/tests.rs");
    std::fs::write(&tests, "use crate::testing::Faults;").unwrap();
    assert!(!is_test_file(&tests), "no module declares it");
    std::fs::write(dir.path().join("owner.rs"), "#[cfg(test)]\nmod tests;\n").unwrap();
    assert!(is_test_file(&tests));
    assert!(code(&src().join("idle/mod.rs")).contains("crate::"));
    assert_eq!(
        crate_imports("use crate::plugin::PluginKind; crate::Service::Gc"),
        BTreeSet::from(["plugin".to_string(), "service".to_string()])
    );
}
