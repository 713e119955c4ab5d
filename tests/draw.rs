//! `kiln draw`: the dot it writes parses and says what the function is (blocks in both CFGs,
//! divergent edges dashed, interfering values in different registers), the SVG is well formed
//! and shows what the allocator did (one series and budget per file, one boundary per block,
//! one marker per spill and reload), and bad input is an error, never a panic.

use kiln::draw;
use kiln_analysis::{Cfg, Interference, compute_liveness};
use kiln_ir::generate::{GenConfig, generate};
use kiln_ir::{Function, Temp};
use kiln_regalloc::Allocator;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kiln(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("kiln runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A diagnostic's words, without the frame and line breaks the terminal width put in.
fn flat(b: &[u8]) -> String {
    text(b)
        .replace(['│', '×'], " ")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kiln-draw-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn parse(src: &str) -> Function {
    kiln_ir::text::parse_function_with(src, &kiln::targets()).expect("the test's .kir reads")
}

/// A loop with a divergent break inside a uniform if, a divergent if with an else, a uniform
/// if without one. Blocks ending in a divergent branch: bb0 and bb4 (`if.divergent` on
/// per-lane conditions) and bb5 (the break, inside the loop's divergent if); the latch's
/// continue follows no divergent continue and is uniform.
const BRANCHES: &str = "target generic(v=16, s=8)

function @branches {
bb0:
    %0:v1 = input 0
    %1:s1 = uniform 0
    if.divergent %0, bb1, bb2, bb3
bb1:
    %2:v1 = fadd %0, 1.0
    jump bb3
bb2:
    %3:v1 = fmul %0, 2.0
    jump bb3
bb3:
    %4:v1 = phi %2, %3
    loop bb4, bb7
bb4:
    %5:v1 = phi %4, %6
    %6:v1 = fadd %5, 1.0
    %7:v1 = flt %6, %0
    if.divergent %7, bb5, bb6, bb6
bb5:
    break bb7
bb6:
    continue bb4
bb7:
    if.uniform %1, bb8, bb9, bb9
bb8:
    output 1, %1
    jump bb9
bb9:
    output 0, %6
    return
}
";

/// The blocks of `BRANCHES` whose terminator is divergent by the analysis.
const DIVERGENT_SOURCES: [&str; 3] = ["bb0", "bb4", "bb5"];

// ---------------------------------------------------------------------------------------------
// A small dot reader: enough of the language to check what `kiln draw` writes.

type Attrs = BTreeMap<String, String>;

#[derive(Debug, Default)]
struct Dot {
    directed: bool,
    /// Node → (attributes, innermost cluster).
    nodes: BTreeMap<String, (Attrs, Option<String>)>,
    /// (from, to, attributes, innermost cluster of the statement).
    edges: Vec<(String, String, Attrs, Option<String>)>,
    clusters: BTreeSet<String>,
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Id(String),
    Html(String),
    P(&'static str),
}

fn lex(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
    while i < c.len() {
        let ch = c[i];
        if ch.is_whitespace() {
            i += 1;
        } else if ch == '"' {
            let mut s = String::new();
            i += 1;
            while c[i] != '"' {
                if c[i] == '\\' {
                    i += 1;
                }
                s.push(c[i]);
                i += 1;
            }
            i += 1;
            out.push(Tok::Id(s));
        } else if ch == '<' {
            let mut depth = 0;
            let mut s = String::new();
            loop {
                match c[i] {
                    '<' => depth += 1,
                    '>' => depth -= 1,
                    _ => {}
                }
                s.push(c[i]);
                i += 1;
                if depth == 0 {
                    break;
                }
            }
            out.push(Tok::Html(s[1..s.len() - 1].to_string()));
        } else if c[i..].starts_with(&['-', '>']) {
            out.push(Tok::P("->"));
            i += 2;
        } else if c[i..].starts_with(&['-', '-']) {
            out.push(Tok::P("--"));
            i += 2;
        } else if let Some(p) = ["{", "}", "[", "]", "=", ";", ","]
            .into_iter()
            .find(|p| p.starts_with(ch))
        {
            out.push(Tok::P(p));
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' || ch == '.' || ch == '-' {
            let start = i;
            while i < c.len()
                && (c[i].is_alphanumeric() || c[i] == '_' || c[i] == '.' || c[i] == '-')
            {
                i += 1;
            }
            out.push(Tok::Id(c[start..i].iter().collect()));
        } else {
            panic!("dot: unexpected character {ch:?} at {i}");
        }
    }
    out
}

/// A Graphviz HTML-like label: well-formed markup, and no empty FONT, B or I element (which
/// `dot` refuses as a syntax error).
fn check_html_label(label: &str) {
    parse_xml(&format!("<LABEL>{label}</LABEL>"));
    for tag in ["FONT", "B", "I"] {
        let mut rest = label;
        while let Some(i) = rest.find(&format!("<{tag}")) {
            let open_end = rest[i..].find('>').unwrap() + i + 1;
            assert!(
                !rest[open_end..].starts_with(&format!("</{tag}>")),
                "dot: empty <{tag}> in a label: {label}"
            );
            rest = &rest[open_end..];
        }
    }
}

fn parse_dot(src: &str) -> Dot {
    let toks = lex(src);
    let mut dot = Dot::default();
    let mut k = 0;
    let word = |t: &Tok| match t {
        Tok::Id(s) | Tok::Html(s) => s.clone(),
        Tok::P(p) => panic!("dot: expected an identifier, found `{p}`"),
    };
    match &toks[0] {
        Tok::Id(s) if s == "digraph" => dot.directed = true,
        Tok::Id(s) if s == "graph" => dot.directed = false,
        t => panic!("dot: starts with {t:?}"),
    }
    k += 1;
    if matches!(toks[k], Tok::Id(_)) {
        k += 1;
    }
    assert_eq!(toks[k], Tok::P("{"), "dot: no body");
    k += 1;
    let mut stack: Vec<Option<String>> = vec![None];
    let attrs = |toks: &[Tok], k: &mut usize| -> BTreeMap<String, String> {
        let mut m = BTreeMap::new();
        if toks.get(*k) != Some(&Tok::P("[")) {
            return m;
        }
        *k += 1;
        while toks[*k] != Tok::P("]") {
            let key = word(&toks[*k]);
            assert_eq!(
                toks[*k + 1],
                Tok::P("="),
                "dot: attribute {key} without value"
            );
            if let Tok::Html(h) = &toks[*k + 2] {
                check_html_label(h);
            }
            m.insert(key, word(&toks[*k + 2]));
            *k += 3;
            if toks[*k] == Tok::P(",") || toks[*k] == Tok::P(";") {
                *k += 1;
            }
        }
        *k += 1;
        m
    };
    while !stack.is_empty() {
        let t = toks
            .get(k)
            .unwrap_or_else(|| panic!("dot: unbalanced braces"));
        match t {
            Tok::P("}") => {
                stack.pop();
                k += 1;
            }
            Tok::P(";") => k += 1,
            Tok::Id(s) if s == "subgraph" => {
                let name = word(&toks[k + 1]);
                assert_eq!(toks[k + 2], Tok::P("{"));
                if name.starts_with("cluster") {
                    dot.clusters.insert(name.clone());
                    stack.push(Some(name));
                } else {
                    stack.push(stack.last().cloned().flatten());
                }
                k += 3;
            }
            Tok::Id(s) if ["graph", "node", "edge"].contains(&s.as_str()) => {
                k += 1;
                attrs(&toks, &mut k);
            }
            _ => {
                let id = word(t);
                k += 1;
                let cluster = stack.last().cloned().flatten();
                match toks.get(k) {
                    Some(Tok::P("=")) => k += 2,
                    Some(Tok::P(op @ ("->" | "--"))) => {
                        assert_eq!(
                            *op == "->",
                            dot.directed,
                            "dot: edge operator of the wrong kind"
                        );
                        let to = word(&toks[k + 1]);
                        k += 2;
                        let a = attrs(&toks, &mut k);
                        dot.edges.push((id, to, a, cluster));
                    }
                    _ => {
                        let a = attrs(&toks, &mut k);
                        assert!(
                            dot.nodes.insert(id.clone(), (a, cluster)).is_none(),
                            "dot: node {id} declared twice"
                        );
                    }
                }
            }
        }
    }
    assert_eq!(k, toks.len(), "dot: text after the graph");
    for (a, b, ..) in &dot.edges {
        assert!(
            dot.nodes.contains_key(a),
            "dot: edge from undeclared node {a}"
        );
        assert!(
            dot.nodes.contains_key(b),
            "dot: edge to undeclared node {b}"
        );
    }
    dot
}

// ---------------------------------------------------------------------------------------------
// A small XML well-formedness checker, and the SVG facts read from it.

#[derive(Debug)]
struct Element {
    name: String,
    attrs: BTreeMap<String, String>,
}

/// Every element of a well-formed XML document, in document order.
fn parse_xml(src: &str) -> Vec<Element> {
    let mut out = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = src.trim_start();
    let mut seen_root = false;
    let check_text = |t: &str| {
        let mut s = t;
        while let Some(i) = s.find('&') {
            let end = s[i..].find(';').expect("xml: unterminated entity") + i;
            let name = &s[i + 1..end];
            assert!(
                ["amp", "lt", "gt", "quot", "apos"].contains(&name)
                    || name.starts_with('#') && name[1..].chars().all(|c| c.is_ascii_digit()),
                "xml: unknown entity &{name};"
            );
            s = &s[end + 1..];
        }
        assert!(!t.contains('<'), "xml: `<` in text");
    };
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("<!--") {
            rest = &r[r.find("-->").expect("xml: unterminated comment") + 3..];
        } else if let Some(r) = rest.strip_prefix('<') {
            let end = r.find('>').expect("xml: unterminated tag");
            let tag = &r[..end];
            rest = &r[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(
                    open.pop().as_deref(),
                    Some(name.trim()),
                    "xml: mismatched end tag"
                );
                continue;
            }
            assert!(
                !tag.starts_with('!') && !tag.starts_with('?'),
                "xml: unexpected {tag}"
            );
            assert!(
                !open.is_empty() || !seen_root,
                "xml: more than one root element"
            );
            seen_root = true;
            let empty = tag.ends_with('/');
            let tag = tag.trim_end_matches('/');
            let name_end = tag.find(char::is_whitespace).unwrap_or(tag.len());
            let name = tag[..name_end].to_string();
            assert!(
                !name.is_empty()
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == ':' || c == '-'),
                "xml: bad element name {name:?}"
            );
            let mut attrs = BTreeMap::new();
            let mut a = tag[name_end..].trim();
            while !a.is_empty() {
                let eq = a.find('=').expect("xml: attribute without value");
                let key = a[..eq].trim().to_string();
                let v = a[eq + 1..].trim_start();
                assert!(v.starts_with('"'), "xml: unquoted attribute {key}");
                let close = v[1..].find('"').expect("xml: unterminated attribute") + 1;
                let value = &v[1..close];
                check_text(value);
                assert!(
                    attrs.insert(key.clone(), value.to_string()).is_none(),
                    "xml: {key} twice"
                );
                a = v[close + 1..].trim_start();
            }
            out.push(Element {
                name: name.clone(),
                attrs,
            });
            if !empty {
                open.push(name);
            }
        } else {
            let end = rest.find('<').unwrap_or(rest.len());
            let t = &rest[..end];
            assert!(
                !open.is_empty() || t.trim().is_empty(),
                "xml: text outside the root"
            );
            check_text(t);
            rest = &rest[end..];
        }
    }
    assert!(open.is_empty(), "xml: unclosed elements {open:?}");
    assert!(seen_root, "xml: no root element");
    out
}

fn class_count(svg: &[Element], class: &str) -> usize {
    svg.iter()
        .filter(|e| e.attrs.get("class").map(String::as_str) == Some(class))
        .count()
}

// ---------------------------------------------------------------------------------------------
// cfg

#[test]
fn cfg_has_every_block_in_both_clusters_and_dashes_exactly_the_divergent_edges() {
    let dir = scratch("cfg");
    let path = write(&dir, "branches.kir", BRANCHES);
    let out = kiln(&["draw", "cfg", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dot = parse_dot(&text(&out.stdout));
    assert!(dot.directed);
    let func = parse(BRANCHES);
    let cfg = Cfg::compute(&func).unwrap();
    assert_eq!(
        dot.clusters,
        BTreeSet::from(["cluster_logical".into(), "cluster_linear".into()])
    );
    for (kind, edges) in [("logical", &cfg.logical), ("linear", &cfg.linear)] {
        let cluster = format!("cluster_{kind}");
        let in_cluster: BTreeSet<&String> = dot
            .nodes
            .iter()
            .filter(|(_, (_, c))| c.as_ref() == Some(&cluster))
            .map(|(id, _)| id)
            .collect();
        assert_eq!(
            in_cluster.len(),
            func.blocks.len(),
            "{kind}: one node per block"
        );
        for b in func.block_ids() {
            assert!(
                in_cluster.contains(&format!("{kind}_{b}")),
                "{kind}: {b} has no node"
            );
        }
        // The edges of the cluster are exactly the CFG's.
        let drawn: BTreeSet<(String, String)> = dot
            .edges
            .iter()
            .filter(|e| e.3.as_ref() == Some(&cluster))
            .map(|e| (e.0.clone(), e.1.clone()))
            .collect();
        let want: BTreeSet<(String, String)> = func
            .block_ids()
            .flat_map(|b| {
                edges.succs[b.index()]
                    .iter()
                    .map(move |s| (format!("{kind}_{b}"), format!("{kind}_{s}")))
            })
            .collect();
        assert_eq!(drawn, want, "{kind} edges");
    }
    let mut dashed = 0;
    for (from, to, attrs, _) in &dot.edges {
        let block = from.split('_').nth(1).unwrap();
        let want = if DIVERGENT_SOURCES.contains(&block) {
            "dashed"
        } else {
            "solid"
        };
        assert_eq!(
            attrs.get("style").map(String::as_str),
            Some(want),
            "{from} -> {to}"
        );
        dashed += (want == "dashed") as usize;
    }
    // bb0 → bb1, bb2, bb4 → bb5, bb6 and bb5 → bb7 logically; bb0 → bb1, bb4 → bb5 and
    // bb5 → bb6 linearly.
    assert_eq!(dashed, 8);
    // Loop headers are outlined twice, back edges labelled.
    assert_eq!(
        dot.nodes["logical_bb4"]
            .0
            .get("peripheries")
            .map(String::as_str),
        Some("2")
    );
    let back: Vec<_> = dot
        .edges
        .iter()
        .filter(|e| e.2.get("label").map(String::as_str) == Some("back"))
        .map(|e| (e.0.as_str(), e.1.as_str()))
        .collect();
    assert_eq!(
        back,
        [("logical_bb6", "logical_bb4"), ("linear_bb6", "linear_bb4")]
    );
}

#[test]
fn cfg_elides_the_middle_of_long_blocks_and_escapes_labels() {
    let mut src =
        String::from("target generic(v=16, s=8)\nfunction @long {\nbb0:\n    %0:v1 = input 0\n");
    for k in 1..40 {
        src.push_str(&format!("    %{k}:v1 = fadd %{}, 1.0\n", k - 1));
    }
    src.push_str("    output 0, %39\n    return\n}\n");
    let dir = scratch("elide");
    let path = write(&dir, "long.kir", &src);
    let out = kiln(&["draw", "cfg", path.to_str().unwrap(), "--max-insts", "10"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    parse_dot(&stdout);
    // 42 instructions, 10 shown.
    assert_eq!(
        stdout.matches("32 instructions not shown").count(),
        2,
        "{stdout}"
    );
    assert!(stdout.contains("%0:v1 = input 0") && stdout.contains(">return<"));
    assert!(!stdout.contains("%20:v1 = fadd"));
    // `<`, `>` and `&` never appear raw inside a label's text.
    let html = draw::html("a <b> & \"c\"");
    assert_eq!(html, "a &lt;b&gt; &amp; &quot;c&quot;");
}

#[test]
fn cfg_of_a_shader_is_the_function_the_back_end_allocates() {
    let out = kiln(&["draw", "cfg", "examples/rings.frag"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dot = parse_dot(&text(&out.stdout));
    let func = draw::load(Path::new("examples/rings.frag"), &Default::default()).unwrap();
    assert!(
        func.target.name().starts_with("vc4"),
        "{}",
        func.target.name()
    );
    assert_eq!(dot.nodes.len(), 2 * func.blocks.len());
    assert!(text(&out.stdout).contains("qpu_"), "vc4 instructions drawn");
}

// ---------------------------------------------------------------------------------------------
// interference

/// Copies and phis to coalesce, values live across a loop, no constraints: the allocator's
/// preparation adds no value.
const COPIES: &str = "target generic(v=16, s=8)

function @copies {
bb0:
    %0:v1 = input 0
    %1:v1 = input 1
    %2:v1 = fadd %0, %1
    %3:v1 = mov %2
    loop bb1, bb4
bb1:
    %4:v1 = phi %3, %8
    %5:v1 = phi %1, %9
    %6:v1 = fmul %4, %5
    %7:v1 = flt %6, %0
    if.divergent %7, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    %8:v1 = fadd %4, 1.0
    %9:v1 = mov %6
    continue bb1
bb4:
    %10:s1 = uniform 0
    %11:v1 = fmul %6, %10
    output 0, %11
    output 1, %4
    return
}
";

/// (value, register name, fill colour) of every node.
fn interference_nodes(dot: &Dot) -> BTreeMap<u32, (String, String)> {
    dot.nodes
        .iter()
        .map(|(id, (attrs, _))| {
            let t: u32 = id.strip_prefix('t').unwrap().parse().unwrap();
            let label = &attrs["label"];
            let reg = label.split("<BR/>").nth(1).unwrap().to_string();
            (t, (reg, attrs["fillcolor"].clone()))
        })
        .collect()
}

#[test]
fn interference_colours_interfering_values_apart_and_groups_coalesced_ones() {
    let dir = scratch("interference");
    let path = write(&dir, "copies.kir", COPIES);
    for allocator in ["ssa", "graph"] {
        let out = kiln(&[
            "draw",
            "interference",
            path.to_str().unwrap(),
            "--allocator",
            allocator,
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let dot = parse_dot(&text(&out.stdout));
        assert!(!dot.directed);
        let func = parse(COPIES);
        let defined = func.defined().iter().filter(|&&d| d).count();
        let nodes = interference_nodes(&dot);
        assert_eq!(nodes.len(), defined, "{allocator}: one node per value");
        // The edges are exactly the pairs the interference analysis says interfere.
        let mut ssa = func.clone();
        let cfg = Cfg::compute(&ssa).unwrap();
        let lv = compute_liveness(&mut ssa, &cfg);
        let inter = Interference::new(&ssa, &cfg, &lv);
        let drawn: BTreeSet<(u32, u32)> = dot
            .edges
            .iter()
            .map(|(a, b, ..)| {
                let n = |s: &str| s[1..].parse::<u32>().unwrap();
                (n(a).min(n(b)), n(a).max(n(b)))
            })
            .collect();
        let mut want = BTreeSet::new();
        for a in 0..func.temps.len() as u32 {
            for b in a + 1..func.temps.len() as u32 {
                if inter.interferes(&ssa, Temp(a), Temp(b)) {
                    want.insert((a, b));
                }
            }
        }
        assert_eq!(drawn, want, "{allocator}: edges");
        assert!(drawn.len() >= 10, "a graph worth the name: {drawn:?}");
        for (a, b) in &drawn {
            let (ra, ca) = &nodes[a];
            let (rb, cb) = &nodes[b];
            assert_ne!(
                ra, rb,
                "{allocator}: %{a} and %{b} interfere in one register"
            );
            assert_ne!(ca, cb, "{allocator}: %{a} and %{b} interfere in one colour");
        }
        // The phi %4 and the copy %3 entering it, and %8 on the back edge, share a register
        // with no copy (so do %5 and %9): coalesced sets, each in one register.
        assert!(!dot.clusters.is_empty(), "{allocator}: nothing coalesced");
        for cluster in &dot.clusters {
            let regs: BTreeSet<&String> = dot
                .nodes
                .iter()
                .filter(|(_, (_, c))| c.as_ref() == Some(cluster))
                .map(|(id, _)| &nodes[&id[1..].parse::<u32>().unwrap()].0)
                .collect();
            assert_eq!(regs.len(), 1, "{allocator}: {cluster} spans {regs:?}");
        }
        // Values of the uniform file have their own shape.
        assert_eq!(dot.nodes["t10"].0["shape"], "box");
        assert_eq!(dot.nodes["t0"].0["shape"], "ellipse");
    }
}

#[test]
fn allocated_registers_are_read_off_as_homes_apart_unless_one_moved() {
    // Generated programs with every feature (vectors, fixed and tied operands, all-lanes
    // writes) at whole files, both allocators. Interfering values in one register are
    // possible only where the allocation moved one of them (live-range splitting around
    // constraints): the picture draws those edges red, and no others.
    let (mut edges, mut shared) = (0, 0);
    for seed in 0..40u64 {
        let mut config = GenConfig::new(seed);
        config.v_units = 32;
        config.s_units = 16;
        config.size = 80;
        let func = generate(&config);
        for allocator in [Allocator::Ssa, Allocator::Graph] {
            let alloc = draw::allocate(&func, allocator, Vec::new()).unwrap();
            let g = draw::interference::graph(&alloc, 10_000).unwrap();
            let dead: BTreeSet<Temp> = alloc
                .ssa
                .blocks
                .iter()
                .flat_map(|b| &b.insts)
                .filter(|i| i.op.is_phi())
                .map(|i| i.defs[0].temp)
                .collect();
            for &v in &g.values {
                let p = &g.placements[v.index()];
                if p.home.is_none() {
                    // Only a phi can lose every trace: no copies (dead) and no reads.
                    assert!(dead.contains(&v) && p.regs.is_empty(), "seed {seed}: {v}");
                }
            }
            let mut red = 0;
            for &(a, b) in &g.edges {
                let (pa, pb) = (&g.placements[a.index()], &g.placements[b.index()]);
                let (Some(ha), Some(hb)) = (pa.home, pb.home) else {
                    continue;
                };
                if pa.spilled || pb.spilled {
                    continue;
                }
                edges += 1;
                let (sa, sb) = (
                    alloc.ssa.class(a).size as u32,
                    alloc.ssa.class(b).size as u32,
                );
                let apart = ha.file() != hb.file()
                    || ha.unit() + sa <= hb.unit()
                    || hb.unit() + sb <= ha.unit();
                if !apart {
                    shared += 1;
                    red += 1;
                    assert!(
                        pa.regs.len() > 1 || pb.regs.len() > 1,
                        "seed {seed} {allocator:?}: {a} in {ha:?} and {b} in {hb:?} interfere, \
                         and neither moved\n{}",
                        kiln_ir::print_function(&alloc.allocated)
                    );
                }
            }
            let dot = draw::interference::dot(&alloc, Default::default()).unwrap();
            assert_eq!(dot.matches("penwidth=2.5").count(), red, "seed {seed}");
        }
    }
    // Rare: most interfering values keep their registers apart throughout.
    assert!(edges > 5000, "{edges}");
    assert!(shared * 500 < edges, "{shared} of {edges}");
}

#[test]
fn interference_refuses_large_graphs_unless_asked() {
    let dir = scratch("limit");
    let path = write(&dir, "copies.kir", COPIES);
    let p = path.to_str().unwrap();
    let out = kiln(&["draw", "interference", p, "--max-nodes", "5"]);
    assert!(!out.status.success());
    let stderr = flat(&out.stderr);
    assert!(
        stderr.contains("12 values, more than the limit of 5") && stderr.contains("--max-nodes 12"),
        "{stderr}"
    );
    let out = kiln(&["draw", "interference", p, "--max-nodes", "12"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

// ---------------------------------------------------------------------------------------------
// pressure

/// Eight values live across a loop: with 3 units of `v`, the allocator must spill.
const SPILLS: &str = "target generic(v=16, s=8)

function @spills {
bb0:
    %0:v1 = input 0
    %1:v1 = fadd %0, 1.0
    %2:v1 = fadd %0, 2.0
    %3:v1 = fadd %0, 3.0
    %4:v1 = fadd %0, 4.0
    %5:v1 = fadd %0, 5.0
    %6:s1 = uniform 0
    loop bb1, bb4
bb1:
    %7:v1 = phi %1, %9
    %8:v1 = fmul %7, %2
    %9:v1 = fadd %8, %3
    %10:v1 = flt %9, %4
    if.divergent %10, bb2, bb3, bb3
bb2:
    break bb4
bb3:
    continue bb1
bb4:
    %11:v1 = fadd %9, %5
    %12:v1 = fmul %11, %6
    %13:v1 = fadd %12, %0
    output 0, %13
    output 1, %1
    return
}
";

#[test]
fn pressure_svg_is_well_formed_and_marks_every_spill_and_reload() {
    let dir = scratch("pressure");
    let path = write(&dir, "spills.kir", SPILLS);
    let func = parse(SPILLS);
    for allocator in [Allocator::Ssa, Allocator::Graph] {
        let name = format!("{allocator:?}").to_lowercase();
        let svg_path = dir.join(format!("{name}.svg"));
        let out = kiln(&[
            "draw",
            "pressure",
            path.to_str().unwrap(),
            "--budget",
            "v=3",
            "--allocator",
            &name,
            "-o",
            svg_path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        let svg = parse_xml(&std::fs::read_to_string(&svg_path).unwrap());
        assert_eq!(svg[0].name, "svg");
        let view: Vec<f64> = svg[0].attrs["viewBox"]
            .split_whitespace()
            .map(|v| v.parse().unwrap())
            .collect();
        let (x0, y0, w, h) = (view[0], view[1], view[2], view[3]);
        let series: Vec<&Element> = svg
            .iter()
            .filter(|e| {
                e.name == "polyline" && e.attrs.get("class").map(String::as_str) == Some("series")
            })
            .collect();
        // One series per file (v and s), every point inside the picture.
        assert_eq!(series.len(), 2, "{name}");
        for s in &series {
            let points: Vec<(f64, f64)> = s.attrs["points"]
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            assert!(points.len() >= 4);
            for (x, y) in points {
                assert!(
                    x0 <= x && x <= x0 + w && y0 <= y && y <= y0 + h,
                    "({x}, {y}) outside"
                );
            }
        }
        assert_eq!(
            class_count(&svg, "budget"),
            2,
            "{name}: a budget line per file"
        );
        assert_eq!(
            class_count(&svg, "boundary"),
            func.blocks.len() - 1,
            "{name}: a boundary per block after the first"
        );
        let alloc = draw::allocate(&func, allocator, vec![Some(3), None]).unwrap();
        assert!(alloc.stats.spills > 0, "{name}: the budget makes it spill");
        assert_eq!(
            class_count(&svg, "spill"),
            alloc.stats.spills as usize,
            "{name}"
        );
        assert_eq!(
            class_count(&svg, "reload"),
            alloc.stats.reloads as usize,
            "{name}"
        );
        assert_eq!(
            class_count(&svg, "remat"),
            alloc.stats.remats as usize,
            "{name}"
        );
        // The budget of v sits at 3 units: its line is below the top of the demand curve.
        let budget_y: f64 = svg
            .iter()
            .find(|e| e.attrs.get("class").map(String::as_str) == Some("budget"))
            .map(|e| e.attrs["y1"].parse().unwrap())
            .unwrap();
        let top = series[0].attrs["points"]
            .split_whitespace()
            .map(|p| p.split_once(',').unwrap().1.parse::<f64>().unwrap())
            .fold(f64::INFINITY, f64::min);
        assert!(top < budget_y, "demand rises above the budget");
    }
}

#[test]
fn pressure_of_a_large_function_stays_in_its_frame() {
    // About 2,000 instructions: the width stops growing, points stay inside.
    let mut config = GenConfig::new(7);
    config.size = 2000;
    config.v_units = 32;
    config.s_units = 16;
    let func = generate(&config);
    let alloc = draw::allocate(&func, Allocator::Ssa, vec![Some(12), Some(8)]).unwrap();
    let p = draw::pressure::measure(&alloc).unwrap();
    assert!(p.demand.len() > 1000, "{}", p.demand.len());
    let svg = parse_xml(&draw::pressure::svg(&func.name, &p));
    let w: f64 = svg[0].attrs["width"].parse().unwrap();
    assert!(w <= 2600.0, "{w}");
    assert_eq!(class_count(&svg, "boundary"), alloc.ssa.blocks.len() - 1);
    assert!(
        alloc.stats.spills > 10 && alloc.stats.remats > 0,
        "{:?}",
        alloc.stats
    );
}

#[test]
fn pressure_markers_are_the_allocators_spills_reloads_and_remats() {
    // Generated programs with every feature, both allocators, budgets that spill: every
    // inserted instruction is found in the allocated function, and none of the input's
    // instructions is taken for one.
    let mut spilled = 0;
    for seed in 0..12u64 {
        let mut config = GenConfig::new(seed);
        config.size = 300;
        config.v_units = 32;
        config.s_units = 16;
        let func = generate(&config);
        for allocator in [Allocator::Ssa, Allocator::Graph] {
            // (A vector may find no aligned block at a tight budget: not this test's concern.)
            let Ok(alloc) = draw::allocate(&func, allocator, vec![Some(16), Some(8)]) else {
                continue;
            };
            spilled += (alloc.stats.spills > 0) as u32;
            let p = draw::pressure::measure(&alloc).unwrap();
            let count = |k| p.markers.iter().filter(|m| m.kind == k).count() as u32;
            let s = &alloc.stats;
            use draw::pressure::Mark;
            assert_eq!(
                (count(Mark::Spill), count(Mark::Reload)),
                (s.spills, s.reloads),
                "seed {seed} {allocator:?}"
            );
            // The SSA spiller keeps the input's instructions; the graph allocator's removes
            // those it recomputes, and a recomputation where the original stood looks like it.
            match allocator {
                Allocator::Ssa => assert_eq!(count(Mark::Remat), s.remats, "seed {seed}"),
                Allocator::Graph => assert!(count(Mark::Remat) <= s.remats, "seed {seed}"),
            }
            assert!(p.markers.iter().all(|m| m.at <= p.demand.len()));
        }
    }
    assert!(spilled >= 16, "{spilled} allocations spilled");
}

// ---------------------------------------------------------------------------------------------
// bad input, outputs

#[test]
fn malformed_kir_is_a_line_column_error() {
    let dir = scratch("bad");
    let path = write(
        &dir,
        "bad.kir",
        "target generic(v=8, s=4)\nfunction @f {\nbb0:\n    %0:v1 = frob 1\n}\n",
    );
    for cmd in ["cfg", "interference", "pressure"] {
        let out = kiln(&["draw", cmd, path.to_str().unwrap()]);
        assert!(!out.status.success());
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("4:13: unknown opcode `frob`"),
            "{cmd}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let out = kiln(&["draw", "cfg", "no/such/file.kir"]);
    assert!(flat(&out.stderr).contains("cannot read no/such/file.kir"));
}

#[test]
fn outputs_never_overwrite_the_input_and_need_a_known_format() {
    let dir = scratch("outputs");
    let path = write(&dir, "branches.kir", BRANCHES);
    let p = path.to_str().unwrap();
    for cmd in ["cfg", "interference", "pressure"] {
        let out = kiln(&["draw", cmd, p, "-o", p]);
        assert!(!out.status.success());
        assert!(
            flat(&out.stderr).contains("refusing to write the output there"),
            "{}",
            text(&out.stderr)
        );
    }
    assert_eq!(std::fs::read_to_string(&path).unwrap(), BRANCHES);
    let out = kiln(&["draw", "cfg", p, "-o", dir.join("x.txt").to_str().unwrap()]);
    assert!(flat(&out.stderr).contains("name the output `.dot`"));
    let out = kiln(&[
        "draw",
        "pressure",
        p,
        "-o",
        dir.join("x.png").to_str().unwrap(),
    ]);
    assert!(flat(&out.stderr).contains("writes SVG"));
    // `.dot` is written as it is.
    let dot_path = dir.join("cfg.dot");
    let out = kiln(&["draw", "cfg", p, "-o", dot_path.to_str().unwrap()]);
    assert!(out.status.success());
    parse_dot(&std::fs::read_to_string(&dot_path).unwrap());
}

fn dot_installed() -> bool {
    Command::new("dot")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn svg_through_dot_or_a_clear_error_without_it() {
    let dir = scratch("svg");
    let path = write(&dir, "branches.kir", BRANCHES);
    let svg = dir.join("cfg.svg");
    // Without `dot` on the path: an error that names it, no file.
    let empty = scratch("empty-path");
    let out = Command::new(env!("CARGO_BIN_EXE_kiln"))
        .args([
            "draw",
            "cfg",
            path.to_str().unwrap(),
            "-o",
            svg.to_str().unwrap(),
        ])
        .env("PATH", &empty)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = flat(&out.stderr);
    assert!(
        stderr.contains("`dot` (Graphviz) is not installed"),
        "{stderr}"
    );
    assert!(!svg.exists());
    if dot_installed() {
        for cmd in ["cfg", "interference"] {
            let out = kiln(&[
                "draw",
                cmd,
                path.to_str().unwrap(),
                "-o",
                svg.to_str().unwrap(),
            ]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            let text = std::fs::read_to_string(&svg).unwrap();
            let start = text.find("<svg").expect("an svg element");
            let elements = parse_xml(&text[start..]);
            assert_eq!(elements[0].name, "svg");
            assert!(elements.iter().any(|e| e.name == "g"));
        }
    }
}
