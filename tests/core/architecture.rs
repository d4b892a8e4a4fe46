//! docs/architecture.md's rules, checked against the source read as Rust
//! (`import_graph`): every folder of `src/` is one layer or wing of the
//! table below, imports run down (the few that run up are listed here and
//! on the page, with why), no two files import each other in a circle, no
//! file outside tests is over 600 lines, and every layer's `mod.rs` says
//! what it owns and may import. A new folder, an import against the
//! direction or a circle fails here until the page and this table say
//! where it goes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::import_graph::{Graph, circles};

/// The layers, from the store up to the command line, with the folders
/// and files of `src/` in each (the table docs/architecture.md shows). A
/// file may import from its own layer and the layers below it.
const LAYERS: &[(&str, &[&str])] = &[
    ("plain data and frozen formats", &["model"]),
    ("store", &["store"]),
    ("config", &["config"]),
    ("fleet state", &["fleet"]),
    ("plugin wing", &["plugin"]),
    ("observation", &["observe"]),
    ("work", &["services", "mirror"]),
    ("node", &["daemon"]),
    (
        "commands and facade",
        &["commands", "error", "testing", "sim", "lib"],
    ),
    ("edge", &["cli", "main"]),
];

/// Imports that run up a layer, as (importing file, imported folder, why).
/// docs/architecture.md lists the same ones; none today.
const KNOWN_UPWARD: &[(&str, &str, &str)] = &[];

/// The most upward imports the house may carry, however well explained.
const MOST_UPWARD: usize = 10;

/// What the plugin wing and config may import: plain data, the store and
/// themselves. Neither depends on anything that uses it.
const WINGS: &[(&str, &[&str])] = &[
    ("plugin", &["plugin", "model", "store"]),
    ("config", &["config", "model", "store"]),
];

/// No source file outside tests is longer than this.
const MOST_LINES: usize = 600;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The folder (or top-level file) of `src/` a file belongs to.
fn top(file: &str) -> &str {
    let first = file.split('/').next().unwrap();
    first.strip_suffix(".rs").unwrap_or(first)
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS
        .iter()
        .position(|(_, members)| members.contains(&top))
}

/// Every import from a layer to one above it: (file, imported folder,
/// the paths that import it).
fn upward(graph: &Graph) -> Vec<(String, String, Vec<String>)> {
    let mut found = Vec::new();
    for (from, targets) in graph.edges(true) {
        for to in targets {
            let (from_top, to_top) = (top(&from), top(&to));
            let (Some(from_layer), Some(to_layer)) = (layer_of(from_top), layer_of(to_top)) else {
                continue; // reported as a folder in no layer
            };
            if to_layer > from_layer {
                found.push((from.clone(), to_top.to_string(), graph.why(&from, &to)));
            }
        }
    }
    found
}

#[test]
fn every_folder_of_src_is_a_layer() {
    let mut unplaced = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        if layer_of(&name).is_none() {
            unplaced.push(name);
        }
    }
    assert!(
        unplaced.is_empty(),
        "in no layer of docs/architecture.md: {unplaced:?}"
    );
}

#[test]
fn imports_run_down_but_the_listed_few() {
    let graph = Graph::read(&src());
    let found = upward(&graph);
    let unlisted: Vec<_> = found
        .iter()
        .filter(|(file, folder, _)| {
            !KNOWN_UPWARD
                .iter()
                .any(|(f, d, _)| f == file && d == folder)
        })
        .collect();
    assert!(unlisted.is_empty(), "imports up a layer: {unlisted:#?}");
    let stale: Vec<_> = KNOWN_UPWARD
        .iter()
        .filter(|(f, d, _)| {
            !found
                .iter()
                .any(|(file, folder, _)| f == file && d == folder)
        })
        .collect();
    assert!(
        stale.is_empty(),
        "listed but gone (take them off the list and the page): {stale:?}"
    );
    assert!(
        KNOWN_UPWARD.len() <= MOST_UPWARD,
        "{} upward imports; at most {MOST_UPWARD}",
        KNOWN_UPWARD.len()
    );
}

#[test]
fn config_and_the_plugin_wing_depend_on_nothing_above_them() {
    let graph = Graph::read(&src());
    let mut beyond = Vec::new();
    for (from, targets) in graph.edges(true) {
        let Some((wing, may_use)) = WINGS.iter().find(|(wing, _)| top(&from) == *wing) else {
            continue;
        };
        for to in targets {
            if !may_use.contains(&top(&to)) {
                beyond.push(format!("{wing}: {from} imports {to}"));
            }
        }
    }
    assert!(beyond.is_empty(), "{beyond:#?}");
}

/// The two wings of the work layer stand apart: neither imports the other.
const APART: &[(&str, &str)] = &[("services", "mirror"), ("mirror", "services")];

#[test]
fn the_wings_of_the_work_layer_stand_apart() {
    let graph = Graph::read(&src());
    let mut crossing = Vec::new();
    for (from, targets) in graph.edges(true) {
        for to in targets {
            if APART.contains(&(top(&from), top(&to))) {
                crossing.push(format!(
                    "{from} imports {to}: {}",
                    graph.why(&from, &to).join(" ")
                ));
            }
        }
    }
    assert!(crossing.is_empty(), "{crossing:#?}");
}

#[test]
fn no_two_files_import_each_other_in_a_circle() {
    let graph = Graph::read(&src());
    let edges = graph.edges(false);
    let found: Vec<String> = circles(&edges)
        .into_iter()
        .map(|circle| describe_circle(&graph, &edges, &circle))
        .collect();
    assert!(found.is_empty(), "{found:#?}");
}

/// A circle's files, and the imports between them.
fn describe_circle(
    graph: &Graph,
    edges: &BTreeMap<String, BTreeSet<String>>,
    circle: &[String],
) -> String {
    let mut lines = vec![circle.join(", ")];
    for from in circle {
        for to in edges[from].iter().filter(|to| circle.contains(to)) {
            lines.push(format!(
                "  {from} -> {to}: {}",
                graph.why(from, to).join(" ")
            ));
        }
    }
    lines.join("\n")
}

/// The files of the crate at `root` (test files left out) over
/// [`MOST_LINES`], with their lengths.
fn long_files(root: &Path) -> Vec<String> {
    let mut long = Vec::new();
    for module in Graph::read(root).modules.values() {
        let text = std::fs::read_to_string(root.join(&module.file)).unwrap();
        let lines = text.lines().count();
        if lines > MOST_LINES {
            long.push(format!("{} ({lines} lines)", module.file));
        }
    }
    long
}

#[test]
fn no_file_outside_tests_is_over_600_lines() {
    let long = long_files(&src());
    assert!(long.is_empty(), "over {MOST_LINES} lines: {long:?}");
}

#[test]
fn every_layer_says_what_it_owns_and_may_import() {
    let mut silent = Vec::new();
    for entry in std::fs::read_dir(src()).unwrap() {
        let path = entry.unwrap().path();
        if !path.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(path.join("mod.rs")).unwrap_or_default();
        let doc: String = text
            .lines()
            .take_while(|line| line.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        if !doc.contains("May import:") {
            silent.push(path.file_name().unwrap().to_string_lossy().to_string());
        }
    }
    assert!(
        silent.is_empty(),
        "mod.rs without a `May import:` line in its doc comment: {silent:?}"
    );
}

/// Writes a small crate's `src/` for the controls.
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

/// The checks can fail: the circle this house once had (the crate's
/// error naming store trust, store trust reading the root, the root
/// returning the crate's error) is found through a re-export; an import up
/// a layer is found; a parent's use of its own files is not a circle; test
/// code is left out.
#[test]
fn the_checks_catch_what_they_are_about() {
    let dir = tree(&[
        (
            "lib.rs",
            "mod error;\npub mod fleet;\npub mod daemon;\npub use error::Error;\n",
        ),
        (
            "error.rs",
            "pub enum Error { Trust(crate::fleet::store_trust::Error) }\n",
        ),
        ("fleet/mod.rs", "pub mod root;\npub mod store_trust;\n"),
        (
            "fleet/store_trust.rs",
            "use super::root::FleetRoot;\npub enum Error {}\npub fn read(_: &FleetRoot) {}\n",
        ),
        (
            "fleet/root/mod.rs",
            "mod poller;\npub use poller::Poller;\npub struct FleetRoot;\n\
             pub fn open() -> Result<FleetRoot, crate::Error> { todo!() }\n\
             #[cfg(test)]\nmod tests;\n",
        ),
        (
            "fleet/root/poller.rs",
            "use super::FleetRoot;\npub struct Poller(FleetRoot);\n",
        ),
        ("fleet/root/tests.rs", "use crate::daemon::Node;\n"),
        (
            "daemon/mod.rs",
            "pub struct Node;\npub fn run() { crate::fleet::root::open().ok(); }\n",
        ),
    ]);
    let graph = Graph::read(dir.path());
    let edges = graph.edges(false);
    assert_eq!(
        circles(&edges),
        [vec![
            "error.rs".to_string(),
            "fleet/root/mod.rs".to_string(),
            "fleet/store_trust.rs".to_string(),
        ]],
        "the circle, found through lib.rs's re-export of Error"
    );
    // The root's `pub use poller::Poller` and the poller's use of the root
    // are a parent and its file, not a circle; the root's tests may use the
    // daemon (above it) without counting.
    assert_eq!(
        graph.resolve(&["fleet".into(), "root".into(), "Poller".into()]),
        Some("fleet/root/poller.rs")
    );
    assert!(
        !graph
            .modules
            .values()
            .any(|m| m.file == "fleet/root/tests.rs")
    );
    let up = upward(&graph);
    let up: Vec<(&str, &str)> = up
        .iter()
        .map(|(f, d, _)| (f.as_str(), d.as_str()))
        .collect();
    assert_eq!(
        up,
        [("fleet/root/mod.rs", "error")],
        "fleet (fleet state) returning the crate's error is an import up"
    );
    // A long file is reported; a long test file is not.
    let long_code = format!("pub fn f() {{}}\n{}", "// .\n".repeat(MOST_LINES));
    let long_tests = "// .\n".repeat(MOST_LINES + 1);
    let dir = tree(&[
        ("lib.rs", "pub mod a;\n"),
        ("a/mod.rs", "mod long;\n#[cfg(test)]\nmod tests;\n"),
        ("a/long.rs", &long_code),
        ("a/tests.rs", &long_tests),
    ]);
    assert_eq!(long_files(dir.path()), ["a/long.rs (601 lines)"]);
}
