//! The crate's import graph between files, read with `syn`: which file
//! each `use` and each `crate::`/`super::`/`self::` path reaches, with
//! re-exports followed to the file that defines the name. Code under
//! `#[cfg(test)]` is left out: tests may reach anywhere. The architecture
//! checks (`architecture.rs`) are judgments over this graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// One source file as a module of the crate.
#[derive(Debug)]
pub struct Module {
    /// Its path below the crate root (`["mirror", "pass"]`).
    pub path: Vec<String>,
    /// The file, relative to `src/`.
    pub file: String,
    /// Names the file defines (functions, types, constants, macros).
    defines: BTreeSet<String>,
    /// Names the file brings in with `use`, as absolute paths.
    uses: BTreeMap<String, Vec<String>>,
    /// Child modules declared with `mod x;`.
    children: BTreeSet<String>,
    /// Paths the file's code reaches, absolute, and whether each is a
    /// re-export of its own child (`pub use child::Name`).
    reaches: Vec<(Vec<String>, bool)>,
}

/// The graph: files and the files each one imports from.
#[derive(Debug, Default)]
pub struct Graph {
    pub modules: BTreeMap<Vec<String>, Module>,
}

impl Graph {
    /// Reads every `.rs` file under `src` but `main.rs` (the binary, which
    /// uses the library by its name) and test files (`tests.rs` that a
    /// `#[cfg(test)] mod tests;` declares).
    pub fn read(src: &Path) -> Graph {
        let mut graph = Graph::default();
        for file in rust_files(src) {
            let relative = file
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .to_string();
            if relative == "main.rs" {
                continue;
            }
            let path = module_path(&relative);
            let text = std::fs::read_to_string(&file).unwrap();
            let syntax =
                syn::parse_file(&text).unwrap_or_else(|e| panic!("{relative} does not parse: {e}"));
            let module = Module::from_syntax(path.clone(), relative, &syntax);
            graph.modules.insert(path, module);
        }
        let test_files: Vec<Vec<String>> = graph
            .modules
            .keys()
            .filter(|path| path.last().is_some_and(|name| name == "tests"))
            .filter(|path| {
                let parent = &path[..path.len() - 1];
                graph
                    .modules
                    .get(parent)
                    .is_some_and(|m| !m.children.contains("tests"))
            })
            .cloned()
            .collect();
        for path in test_files {
            graph.modules.remove(&path);
        }
        graph
    }

    /// The file a path (absolute, below `crate`) reaches: the deepest
    /// module it names, or, for an item, the file that defines it, through
    /// `use` re-exports.
    pub fn resolve(&self, path: &[String]) -> Option<&str> {
        self.resolve_depth(path, 0)
    }

    fn resolve_depth(&self, path: &[String], depth: usize) -> Option<&str> {
        if depth > 16 {
            return None;
        }
        let mut at: Vec<String> = Vec::new();
        for (i, segment) in path.iter().enumerate() {
            let mut deeper = at.clone();
            deeper.push(segment.clone());
            if self.modules.contains_key(&deeper) {
                at = deeper;
                continue;
            }
            let module = self.modules.get(&at)?;
            if module.defines.contains(segment) {
                return Some(&module.file);
            }
            if let Some(target) = module.uses.get(segment) {
                let mut full = target.clone();
                full.extend(path[i + 1..].iter().cloned());
                return self.resolve_depth(&full, depth + 1).or(Some(&module.file));
            }
            return Some(&module.file);
        }
        self.modules.get(&at).map(|m| m.file.as_str())
    }

    /// Every file's imports: the files its code reaches, itself left out.
    /// With `with_own_reexports` false, a module's `pub use` of its own
    /// children is not an import (it passes names through; the names'
    /// users are resolved to the child).
    /// The paths in `from` that reach `to`, for failure messages.
    pub fn why(&self, from: &str, to: &str) -> Vec<String> {
        let mut out = Vec::new();
        for module in self.modules.values().filter(|m| m.file == from) {
            for (path, own) in &module.reaches {
                if *own {
                    continue;
                }
                if self.resolve(path) == Some(to) {
                    out.push(path.join("::"));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    pub fn edges(&self, with_own_reexports: bool) -> BTreeMap<String, BTreeSet<String>> {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let path_of: BTreeMap<&str, &Vec<String>> = self
            .modules
            .values()
            .map(|m| (m.file.as_str(), &m.path))
            .collect();
        for module in self.modules.values() {
            let entry = edges.entry(module.file.clone()).or_default();
            for (path, own_reexport) in &module.reaches {
                if *own_reexport && !with_own_reexports {
                    continue;
                }
                if let Some(file) = self.resolve(path) {
                    let target = path_of[file];
                    let descendant =
                        target.len() > module.path.len() && target.starts_with(&module.path);
                    if file != module.file && !descendant {
                        entry.insert(file.to_string());
                    }
                }
            }
        }
        edges
    }
}

/// Strongly connected groups of more than one file: the circles.
pub fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Tarjan's algorithm, iterative enough for a crate's few hundred files.
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        next: usize,
        found: Vec<Vec<String>>,
    }
    fn connect<'a>(state: &mut State<'a>, node: &'a str) {
        state.index.insert(node, state.next);
        state.low.insert(node, state.next);
        state.next += 1;
        state.stack.push(node);
        state.on_stack.insert(node);
        let edges = state.edges;
        for next in edges.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !state.index.contains_key(next) {
                connect(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut group = Vec::new();
            loop {
                let member = state.stack.pop().unwrap();
                state.on_stack.remove(member);
                group.push(member.to_string());
                if member == node {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                state.found.push(group);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            connect(&mut state, node);
        }
    }
    state.found
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

/// `mirror/pass.rs` is `["mirror", "pass"]`; `mirror/mod.rs` and
/// `mirror.rs` are `["mirror"]`; `lib.rs` is the crate root, `[]`.
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .parse_args::<syn::Meta>()
                .is_ok_and(|meta| meta.path().is_ident("test"))
    })
}

impl Module {
    fn from_syntax(path: Vec<String>, file: String, syntax: &syn::File) -> Module {
        let mut module = Module {
            path,
            file,
            defines: BTreeSet::new(),
            uses: BTreeMap::new(),
            children: BTreeSet::new(),
            reaches: Vec::new(),
        };
        for item in &syntax.items {
            if let syn::Item::Mod(m) = item
                && m.content.is_none()
                && !is_test_only(&m.attrs)
            {
                module.children.insert(m.ident.to_string());
            }
        }
        for item in &syntax.items {
            module.read_item(item);
        }
        module
    }

    fn read_item(&mut self, item: &syn::Item) {
        let (attrs, name): (&[syn::Attribute], Option<&syn::Ident>) = match item {
            syn::Item::Const(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Enum(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Fn(i) => (&i.attrs, Some(&i.sig.ident)),
            syn::Item::Macro(i) => (&i.attrs, i.ident.as_ref()),
            syn::Item::Mod(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Static(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Struct(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Trait(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Type(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Union(i) => (&i.attrs, Some(&i.ident)),
            syn::Item::Impl(i) => (&i.attrs, None),
            syn::Item::Use(i) => (&i.attrs, None),
            _ => (&[], None),
        };
        if is_test_only(attrs) {
            return;
        }
        if let syn::Item::Mod(m) = item
            && m.content.is_none()
        {
            return;
        }
        if let Some(name) = name {
            self.defines.insert(name.to_string());
        }
        if let syn::Item::Use(u) = item {
            let public = !matches!(u.vis, syn::Visibility::Inherited);
            let mut found = Vec::new();
            flatten_use(&u.tree, Vec::new(), &mut found);
            for (segments, alias) in found {
                let Some(absolute) = self.absolute(&segments) else {
                    continue; // an external crate
                };
                let own_child = public
                    && absolute.len() > self.path.len()
                    && absolute.starts_with(&self.path)
                    && self.children.contains(&absolute[self.path.len()]);
                if let Some(alias) = alias {
                    self.uses.insert(alias, absolute.clone());
                }
                self.reaches.push((absolute, own_child));
            }
            return;
        }
        let mut visitor = Paths { found: Vec::new() };
        visitor.visit_item(item);
        for segments in visitor.found {
            if let Some(absolute) = self.absolute(&segments) {
                self.reaches.push((absolute, false));
            }
        }
    }

    /// A path's absolute form below `crate`, or None for a path that
    /// starts elsewhere (an external crate, a local name).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        let mut at: Vec<String>;
        let rest: &[String];
        match first.as_str() {
            "crate" => {
                at = Vec::new();
                rest = &segments[1..];
            }
            "self" => {
                at = self.path.clone();
                rest = &segments[1..];
            }
            "super" => {
                at = self.path.clone();
                let mut i = 0;
                while segments.get(i).is_some_and(|s| s == "super") {
                    at.pop();
                    i += 1;
                }
                rest = &segments[i..];
            }
            name if self.children.contains(name) => {
                at = self.path.clone();
                rest = segments;
            }
            name if self.uses.contains_key(name) => {
                at = self.uses[name].clone();
                rest = &segments[1..];
            }
            _ => return None,
        }
        at.extend(rest.iter().cloned());
        Some(at)
    }
}

/// The paths of a `use` tree, each with the name it binds (None for a
/// glob or `_`).
fn flatten_use(
    tree: &syn::UseTree,
    prefix: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut path = prefix;
            if name == "self" {
                let bound = path.last().cloned();
                out.push((path, bound));
            } else {
                path.push(name.clone());
                out.push((path, Some(name)));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix;
            path.push(r.ident.to_string());
            let alias = r.rename.to_string();
            out.push((path, (alias != "_").then_some(alias)));
        }
        syn::UseTree::Glob(_) => out.push((prefix, None)),
        syn::UseTree::Group(g) => {
            for tree in &g.items {
                flatten_use(tree, prefix.clone(), out);
            }
        }
    }
}

/// Collects every path in an item's code (types, expressions, patterns,
/// and `crate::`/`super::` paths inside macro calls), leaving out what
/// `#[cfg(test)]` marks.
struct Paths {
    found: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.found
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            _ => return syn::visit::visit_item(self, item),
        };
        if !is_test_only(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut found = Vec::new();
        flatten_use(&u.tree, Vec::new(), &mut found);
        self.found.extend(found.into_iter().map(|(path, _)| path));
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        macro_paths(mac.tokens.clone(), &mut self.found);
        syn::visit::visit_macro(self, mac);
    }
}

/// `crate::a::b`, `super::a` and `self::a` sequences in a macro's tokens.
fn macro_paths(tokens: proc_macro2::TokenStream, out: &mut Vec<Vec<String>>) {
    use proc_macro2::TokenTree;
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        if let TokenTree::Group(group) = &trees[i] {
            macro_paths(group.stream(), out);
        }
        let starts = matches!(&trees[i], TokenTree::Ident(id) if id == "crate" || id == "super" || id == "self");
        if starts {
            let mut path = Vec::new();
            let mut j = i;
            while let Some(TokenTree::Ident(id)) = trees.get(j) {
                path.push(id.to_string());
                let colons = matches!(trees.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                    && matches!(trees.get(j + 2), Some(TokenTree::Punct(p)) if p.as_char() == ':');
                if !colons {
                    break;
                }
                j += 3;
            }
            if path.len() > 1 {
                out.push(path);
            }
            i = j.max(i + 1);
            continue;
        }
        i += 1;
    }
}
