//! Hostile copiers no Rust guest can express, written by hand as core
//! WebAssembly text and wrapped as `copier-plugin` components: results
//! that alias one large string, linear memories that each fit the
//! plugin's memory but together do not, and a table grown without end.

use std::path::Path;

/// Where the large string lives, and how long it is.
const BIG_STRING_AT: u32 = 0x1_0000;
const BIG_STRING_LEN: u32 = 1024 * 1024;
/// Where `copy` writes its result list (`copy-result` is 32 bytes).
const RESULTS_AT: u32 = 0x1000;

/// The attack a hand-written copier makes.
#[derive(Clone, Copy, Debug)]
pub enum Attack {
    /// `copy` returns this many results whose paths all point at one
    /// 1 MiB string: little guest memory, much host memory once lifted.
    Alias(u32),
    /// The module declares three more linear memories of 30 MiB each:
    /// under a 32 or 64 MiB cap one by one, over it together.
    Memories,
    /// `copy` grows a table by 10,000 elements at a time, forever.
    Table,
}

/// The core module: a bump allocator, `describe` and `configure` that
/// answer like any copier, and a `copy` that releases its borrowed
/// stores (as the canonical ABI requires) and makes the attack.
fn core_module(attack: Attack) -> String {
    let extra_memories = match attack {
        Attack::Memories => "(memory 480) (memory 480) (memory 480)",
        _ => "",
    };
    let copy_body = match attack {
        Attack::Alias(results) => format!(
            "(block $done (loop $next
               (br_if $done (i32.ge_u (local.get $i) (i32.const {results})))
               (local.set $at (i32.add (i32.const {RESULTS_AT}) (i32.mul (local.get $i) (i32.const 32))))
               ;; path: the big string; outcome: err(kind, message), both short
               (i32.store (local.get $at) (i32.const {BIG_STRING_AT}))
               (i32.store offset=4 (local.get $at) (i32.const {BIG_STRING_LEN}))
               (i32.store8 offset=8 (local.get $at) (i32.const 1))
               (i32.store offset=16 (local.get $at) (i32.const 32))
               (i32.store offset=20 (local.get $at) (i32.const 5))
               (i32.store offset=24 (local.get $at) (i32.const 32))
               (i32.store offset=28 (local.get $at) (i32.const 5))
               (local.set $i (i32.add (local.get $i) (i32.const 1)))
               (br $next)))
             (i32.store (i32.const 0x200) (i32.const {RESULTS_AT}))
             (i32.store (i32.const 0x204) (i32.const {results}))
             (i32.const 0x200)"
        ),
        Attack::Memories => "(i32.const 0x200)".to_string(),
        Attack::Table => "(loop $more
               (drop (table.grow $t (ref.null func) (i32.const 10000)))
               (br $more))
             (unreachable)"
            .to_string(),
    };
    format!(
        r#"(module
  (import "sleet:plugin/blob-store@0.1.0" "[resource-drop]store" (func $drop_store (param i32)))
  (memory (export "memory") 32)
  {extra_memories}
  (table $t 1 funcref)
  (global $heap (mut i32) (i32.const 0x11_0000))
  (data (i32.const 32) "wat-copier")
  (data (i32.const 48) "0.1.0")
  (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $at i32)
    (local.set $at (i32.and (i32.add (global.get $heap) (i32.sub (local.get 2) (i32.const 1)))
                            (i32.sub (i32.const 0) (local.get 2))))
    (global.set $heap (i32.add (local.get $at) (local.get 3)))
    (if (i32.gt_u (global.get $heap) (i32.const 0x20_0000)) (then (unreachable)))
    (local.get $at))
  (func (export "sleet:plugin/copier@0.1.0#describe") (result i32)
    (i32.store (i32.const 0x100) (i32.const 32))
    (i32.store (i32.const 0x104) (i32.const 10))
    (i32.store (i32.const 0x108) (i32.const 48))
    (i32.store (i32.const 0x10c) (i32.const 5))
    (i32.store (i32.const 0x110) (i32.const 0))
    (i32.const 0x100))
  (func (export "sleet:plugin/copier@0.1.0#configure") (param i32 i32) (result i32)
    (i32.store8 (i32.const 0x180) (i32.const 0))
    (i32.const 0x180))
  (func (export "sleet:plugin/copier@0.1.0#copy") (param i32 i32 i32 i32) (result i32)
    (local $i i32) (local $at i32)
    ;; the borrowed store handles end before the call does
    (call $drop_store (local.get 0))
    (call $drop_store (local.get 1))
    {copy_body}))"#
    )
}

/// The component bytes for `attack`, typed by sleet's own `plugin.wit`.
pub fn component(attack: Attack) -> Vec<u8> {
    let mut module = wat::parse_str(core_module(attack)).expect("the core module parses");
    let mut resolve = wit_parser::Resolve::default();
    let package = resolve
        .push_str(
            "plugin.wit",
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/wit/plugin.wit")),
        )
        .expect("sleet's WIT parses");
    let world = resolve
        .select_world(&[package], Some("copier-plugin"))
        .expect("the copier world");
    wit_component::embed_component_metadata(
        &mut module,
        &resolve,
        world,
        wit_component::StringEncoding::UTF8,
    )
    .expect("metadata embeds");
    wit_component::ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .expect("the module fits the world")
        .encode()
        .expect("the component encodes")
}

/// Writes the component for `attack` into `dir` as plugin `name`.
pub fn install(dir: &Path, name: &str, attack: Attack) {
    std::fs::write(dir.join(format!("{name}.wasm")), component(attack)).unwrap();
}
