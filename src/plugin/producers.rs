//! Who made a component: the `producers` custom sections its toolchain
//! wrote (in the component and in its core modules), summarised as the
//! languages and the tools that processed it. Shown by `sleet plugin
//! check` so an operator knows what runs; a component may say nothing, or
//! anything (it is the author's claim, not something sleet relies on).

use std::collections::BTreeSet;

use wasmparser::{KnownCustom, Parser, Payload};

/// Names kept per field, and bytes per name or version: a component's
/// claims are shown, so they are bounded like any plugin text.
const MAX_NAMES: usize = 8;
const MAX_TEXT: usize = 64;

/// What the component says of itself: the languages and tools its own
/// `producers` section names (componentize-js: `JavaScript;
/// ComponentizeJS 0.23.0, ...`); else a language its linked libraries
/// show (componentize-py names none, but links CPython as
/// `libpython3.14.so`: `Python 3.14`); else the languages its core
/// modules name (a Rust component's main module says `Rust`, as does
/// componentize-py's runtime, which is why the libraries come first);
/// `None` when nothing is named.
pub fn toolchain(bytes: &[u8]) -> Option<String> {
    let mut component = Named::default();
    let mut modules = Named::default();
    let mut depth = 0usize;
    for payload in Parser::new(0).parse_all(bytes) {
        let Ok(payload) = payload else { break };
        match payload {
            Payload::Version { .. } => depth += 1,
            Payload::End(_) => depth = depth.saturating_sub(1),
            Payload::InstanceSection(instances) if depth == 1 => {
                for instance in instances.into_iter().flatten() {
                    if let wasmparser::Instance::Instantiate { args, .. } = instance {
                        for arg in args.iter() {
                            if let Some(language) = linked_language(arg.name) {
                                component.inferred.get_or_insert(language);
                            }
                        }
                    }
                }
            }
            Payload::CustomSection(section) => {
                if let KnownCustom::Producers(fields) = section.as_known() {
                    let into = if depth == 1 {
                        &mut component
                    } else {
                        &mut modules
                    };
                    into.read(fields);
                }
            }
            _ => {}
        }
    }
    let mut parts = Vec::new();
    if !component.languages.is_empty() {
        parts.push(join(&component.languages));
    } else if let Some(language) = &component.inferred {
        parts.push(language.clone());
    }
    if !component.tools.is_empty() {
        parts.push(join(&component.tools));
    }
    let mut said = parts.join("; ");
    if component.languages.is_empty()
        && component.inferred.is_none()
        && !modules.languages.is_empty()
    {
        let modules = format!("modules in {}", join(&modules.languages));
        said = if said.is_empty() {
            modules
        } else {
            format!("{said} ({modules})")
        };
    }
    (!said.is_empty()).then_some(said)
}

/// Languages and processing tools named by some `producers` sections.
#[derive(Default)]
struct Named {
    languages: BTreeSet<String>,
    tools: BTreeSet<String>,
    /// A language shown by a library the component links, not claimed.
    inferred: Option<String>,
}

/// The language a linked library's name shows: `libpython3.14.so` is
/// CPython (what componentize-py links).
fn linked_language(library: &str) -> Option<String> {
    let version = library.strip_prefix("libpython")?.strip_suffix(".so")?;
    let plausible = !version.is_empty()
        && version.len() <= 8
        && version.chars().all(|c| c.is_ascii_digit() || c == '.');
    plausible.then(|| format!("Python {version}"))
}

impl Named {
    fn read(&mut self, fields: wasmparser::ProducersSectionReader<'_>) {
        for field in fields.into_iter().flatten() {
            let into = match field.name {
                "language" => &mut self.languages,
                "processed-by" => &mut self.tools,
                _ => continue,
            };
            for value in field.values.into_iter().flatten() {
                if into.len() < MAX_NAMES {
                    into.insert(named(value.name, value.version));
                }
            }
        }
    }
}

fn join(names: &BTreeSet<String>) -> String {
    names.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// `name version`, each cut and escaped like any text from a plugin; a
/// version is its first word (clang's runs on with a repository URL).
fn named(name: &str, version: &str) -> String {
    let name = super::text::bounded(name, MAX_TEXT);
    let version = super::text::bounded(version.split_whitespace().next().unwrap_or(""), MAX_TEXT);
    if version.is_empty() {
        name
    } else {
        format!("{name} {version}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_linked_cpython_shows_python() {
        assert_eq!(
            linked_language("libpython3.14.so").as_deref(),
            Some("Python 3.14")
        );
        assert_eq!(linked_language("libc.so"), None);
        assert_eq!(linked_language("libpython<script>.so"), None);
    }

    #[test]
    fn a_component_without_producers_names_nothing() {
        let bytes = wat::parse_str("(component)").unwrap();
        assert_eq!(toolchain(&bytes), None);
        assert_eq!(toolchain(b"not wasm at all"), None);
    }
}
