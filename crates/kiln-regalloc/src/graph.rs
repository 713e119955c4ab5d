//! Class-based graph colouring (seed 002): Runeson & Nyström's retargetable colouring for
//! irregular register files, as Mesa's `util/register_allocate.c` does it, on kiln's exact
//! interference — graph, coalescing into merge sets, simplify, select. Its colours become the
//! homes the SSA assigner (`assign`) tries first. The design is in `docs/regalloc.md` ("The
//! graph-colouring allocator").

use crate::assign::{VectorUse, vector_uses};
use crate::regset::{ClassId, RegModel};
use kiln_analysis::Liveness;
use kiln_analysis::live_set::LiveList;
use kiln_ir::{Cfg, FileId, Function, Opcode, PhysReg, RegClass, Temp};
use rustc_hash::FxHashMap as HashMap;
use smallvec::{SmallVec, smallvec};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex, OnceLock};

/// The register model of `func`'s target cut to `limit`, from a cache shared by every
/// colouring: its classes and q-values are computed once per target and budget (Mesa's
/// `ra_set_finalize` runs once per compiler, `vc4_alloc_reg_set`).
fn cached_model(func: &Function, limit: &[u32]) -> RegModel {
    // The last model this thread used, by its target (the same object: the entry holds it, so
    // its address is not reused) and budget — a compile asks for one model, once or twice,
    // and a string key is not made for that.
    /// A target, a budget and the model of the two.
    type Entry = (Arc<dyn kiln_ir::Target>, Vec<u32>, RegModel);
    thread_local! {
        static LAST: std::cell::RefCell<Option<Entry>> = const { std::cell::RefCell::new(None) };
    }
    let target = &func.target;
    let hit = LAST.with_borrow(|last| match last {
        Some((t, l, m)) if Arc::ptr_eq(t, target) && l[..] == *limit => Some(m.clone()),
        _ => None,
    });
    if let Some(m) = hit {
        return m;
    }
    let model = shared_model(func, limit);
    LAST.set(Some((target.clone(), limit.to_vec(), model.clone())));
    model
}

/// The model of `func`'s target cut to `limit`, from the process-wide cache.
fn shared_model(func: &Function, limit: &[u32]) -> RegModel {
    static MODELS: OnceLock<Mutex<HashMap<String, RegModel>>> = OnceLock::new();
    let target = &func.target;
    let key = format!("{}{:?}{limit:?}", target.name(), target.params());
    let models = MODELS.get_or_init(Default::default);
    if let Some(m) = models.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return m;
    }
    // The model counts only the starts the budget allows.
    let budgeted = Arc::new(kiln_ir::ResizedTarget::budget(target.clone(), limit));
    let mut model = RegModel::new(budgeted);
    // Every class of one unit and of the target's vector sizes, with every subset (vc4: its
    // six, closed under intersection).
    let mut classes = Vec::new();
    for (f, _) in target.files().iter().enumerate() {
        let file = FileId(f as u8);
        for size in (1..=target.max_size(file)).filter(|s| s.is_power_of_two()) {
            let plain = target.class(file, size);
            classes.push(plain);
            for (k, sub) in target.subsets().iter().enumerate() {
                if sub.file == file {
                    classes.push(RegClass {
                        subset: Some(kiln_ir::SubsetId::new(k)),
                        ..plain
                    });
                }
            }
        }
    }
    model.finalize(&classes);
    if let Ok(mut m) = models.lock() {
        m.insert(key, model.clone());
    }
    model
}

/// What the colouring did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColourStats {
    pub nodes: u32,
    pub edges: u32,
    /// Nodes pushed without being trivially colourable (Briggs), and those that then found no
    /// colour.
    pub optimistic: u32,
    pub uncoloured: u32,
    /// Copy-related pairs merged by conservative coalescing (Briggs's test, and George's when
    /// Briggs's fails), and of those, pairs merged at an offset (vector parts).
    pub coalesced: u32,
    pub coalesced_george: u32,
    pub coalesced_at_offset: u32,
}

/// The colouring of a function: a home per temp, and the temps to spill before colouring again.
#[derive(Clone, Debug, Default)]
pub struct Colouring {
    pub homes: Vec<Option<PhysReg>>,
    /// Members of the nodes that found no colour and may be spilled (Chaitin–Briggs's actual
    /// spills), ascending.
    pub spill: Vec<Temp>,
    pub stats: ColourStats,
}

/// Colours the temps of `func` (liveness `lv`, kill flags set) within `limit[f]` units per
/// file. `unspillable[t]` marks temps spilling cannot help (reloads, spilled values): they get
/// an infinite spill cost.
pub fn colour(
    func: &Function,
    cfg: &Cfg,
    lv: &Liveness,
    limit: &[u32],
    unspillable: &[bool],
) -> Colouring {
    let mut model = cached_model(func, limit);
    let graph = build(func, cfg, lv);
    let mut sets = Sets::new(func, &mut model, &graph);
    let mut stats = ColourStats {
        nodes: sets.class.iter().filter(|c| c.is_some()).count() as u32,
        edges: graph.adj.entries() as u32 / 2,
        ..ColourStats::default()
    };
    sets.coalesce(func, &mut model, &graph, &mut stats);
    if kiln_analysis::DebugFlags::from_env().ra {
        for (t, m) in sets.members.iter().enumerate() {
            if m.len() > 1 {
                let list: Vec<String> = m
                    .iter()
                    .map(|&x| format!("%{x}@{}", sets.offset[x as usize]))
                    .collect();
                eprintln!("set {t}: {}", list.join(" "));
            }
        }
    }
    let stack = sets.simplify(&mut model, unspillable, &mut stats);
    let mut colouring = sets.select(func, &model, &graph, stack, unspillable, &mut stats);
    colouring.stats = stats;
    colouring
}

/// The interference graph [`colour`] starts from, and the copy affinities it coalesces along,
/// for tools that show them (`kiln draw interference`).
#[derive(Clone, Debug, Default)]
pub struct GraphView {
    /// Neighbours of every temp, ascending.
    pub adj: Vec<Vec<u32>>,
    /// Copy partners of every temp: `(partner, offset)` where the copy is an identity when
    /// the temp's first unit is the partner's plus `offset`.
    pub partners: Vec<Vec<(u32, i32)>>,
}

/// The graph of `func` (liveness `lv`, kill flags set) that [`colour`] builds.
pub fn interference_graph(func: &Function, cfg: &Cfg, lv: &Liveness) -> GraphView {
    let graph = build(func, cfg, lv);
    GraphView {
        adj: (0..graph.adj.len())
            .map(|t| graph.adj.of(t).to_vec())
            .collect(),
        partners: graph
            .partners
            .into_iter()
            .map(|p| p.into_iter().map(|(t, offset, _)| (t, offset)).collect())
            .collect(),
    }
}

/// Nodes of the graph: sets of temps merged by coalescing, each member at a unit offset from
/// the set's start — ir3's merge sets, seed 001's compound values: a vector and the scalars
/// `split_vector` defines or `create_vector` reads are one node, each part at its place.
/// Interference stays per member (`Graph::adj`), so select places a set exactly (a dead part's
/// units are free for others); simplify and the coalescing tests see one node per set whose
/// neighbours block its whole span (conservative).
struct Sets<'g> {
    /// Temps of the function; ids from here on are vector operands.
    temps: usize,
    /// Scratch marks of [`Sets::neighbours`].
    mark: Vec<u32>,
    stamp: u32,
    /// Sets whose list may name sets merged into others since it was made.
    stale: Vec<bool>,
    /// Representative (set) of every temp; the representative's `offset` is 0.
    rep: Vec<u32>,
    /// Unit offset of every temp from its set's start.
    offset: Vec<u32>,
    /// Members of every set (at its representative), and the set's class (a member's class
    /// that spans the set; `None` for temps that are not nodes).
    members: Vec<SmallVec<[u32; 2]>>,
    class: Vec<Option<ClassId>>,
    /// Set-level adjacency (representatives, ascending), and pressure: Σ q over it. A set's
    /// list is its own once a merge changed it (`own`), else its temp's list in the graph.
    base: &'g Lists,
    own: Vec<Option<Vec<u32>>>,
    pressure: Vec<u32>,
    /// Instructions the set's members are live across, and Σ uses × 10^loop depth.
    length: Vec<u32>,
    /// The first definition of the set's members in layout order.
    order: Vec<u32>,
    weight: Vec<f64>,
}

/// The list of set `s`: its own, else its temp's in the graph (a vector operand's set has
/// none there).
fn list_of<'a>(own: &'a [Option<Vec<u32>>], base: &'a Lists, s: usize) -> &'a [u32] {
    match &own[s] {
        Some(list) => list,
        None if s < base.len() => base.of(s),
        None => &[],
    }
}

impl<'g> Sets<'g> {
    /// One set per temp an instruction defines (a number whose definition the middle end
    /// removed is no node), then one empty set per vector operand (`Graph::groups`), which its
    /// members join by coalescing.
    fn new(func: &Function, model: &mut RegModel, graph: &'g Graph) -> Sets<'g> {
        let n = func.temps.len();
        // (Most temps share a class with the one before: its id is looked up once a run.)
        let mut last: Option<(RegClass, ClassId)> = None;
        let mut class: Vec<Option<ClassId>> = func
            .temps
            .iter()
            .zip(&graph.order)
            .map(|(&c, &at)| {
                (!c.is_none() && at != u32::MAX).then(|| match last {
                    Some((l, id)) if l == c => id,
                    _ => {
                        let id = model.class_id(c);
                        last = Some((c, id));
                        id
                    }
                })
            })
            .collect();
        for (v, _) in &graph.groups {
            class.push(Some(
                model.class_id(func.target.class(v.file, v.size as u8)),
            ));
        }
        let total = class.len();
        let pressure = (0..n)
            .map(|t| match class[t] {
                Some(b) => {
                    let q = model.q_row(b);
                    graph
                        .adj
                        .of(t)
                        .iter()
                        .filter_map(|&u| class[u as usize])
                        .map(|c| q[c.0 as usize])
                        .sum()
                }
                None => 0,
            })
            .chain(std::iter::repeat_n(0, total - n))
            .collect();
        Sets {
            temps: n,
            mark: vec![0; total],
            stamp: 0,
            stale: vec![false; total],
            rep: (0..total as u32).collect(),
            offset: vec![0; total],
            // A vector operand's own id is a member of its set, so that `rep` finds it.
            members: (0..total as u32).map(|t| smallvec![t]).collect(),
            class,
            base: &graph.adj,
            own: vec![None; total],
            pressure,
            length: extended(&graph.length, 0, total),
            order: extended(&graph.order, u32::MAX, total),
            weight: extended(&graph.weight, 0.0, total),
        }
    }

    /// The list of set `s` ([`list_of`]).
    fn list(&self, s: u32) -> &[u32] {
        list_of(&self.own, self.base, s as usize)
    }

    fn span(&self, model: &RegModel, s: u32) -> u32 {
        self.class[s as usize].map_or(0, |c| model.class(c).size as u32)
    }

    /// Conservative coalescing of copy-related sets, heaviest copies first (Σ 10^loop depth
    /// of the copies): Briggs's test, then George's (Briggs et al. 1994, George & Appel 1996),
    /// both generalised to classes through the pq test as Runeson & Nyström do, so merging
    /// never makes the graph harder to colour. Two sets merge at the offset their copy asks
    /// for when one's class spans the other at that offset, every start of the outer class puts
    /// the inner set on one of its own starts, and no two members that would share a unit
    /// interfere.
    ///
    /// Cost: each attempt walks the members of the smaller set and their neighbours, and merges
    /// sorted neighbour lists; a set's members move to the one that contains it.
    fn coalesce(
        &mut self,
        func: &Function,
        model: &mut RegModel,
        graph: &Graph,
        stats: &mut ColourStats,
    ) {
        let mut copies: Vec<(u32, u32, i32, f64)> = Vec::new();
        for (a, ps) in graph.partners.iter().enumerate() {
            for &(b, delta, w) in ps {
                if (a as u32) < b {
                    copies.push((a as u32, b, delta, w));
                }
            }
        }
        let n = func.temps.len() as u32;
        for (g, (v, w)) in graph.groups.iter().enumerate() {
            for &(t, off) in &v.members {
                copies.push((t.0, n + g as u32, off as i32, *w));
            }
        }
        copies.sort_by(|x, y| y.3.total_cmp(&x.3).then((x.0, x.1).cmp(&(y.0, y.1))));
        let mut places: HashMap<(ClassId, ClassId, u32), bool> = HashMap::default();
        let (mut adj_inner, mut adj_outer, mut shared) = (Vec::new(), Vec::new(), Vec::new());
        for (a, b, delta, _) in copies {
            let (sa, sb) = (self.rep[a as usize], self.rep[b as usize]);
            if sa == sb {
                continue;
            }
            let (Some(ca), Some(cb)) = (self.class[sa as usize], self.class[sb as usize]) else {
                continue;
            };
            if model.class(ca).file != model.class(cb).file {
                continue;
            }
            // colour(a) = colour(b) + delta: set b starts at `at` units into set a.
            let at = self.offset[a as usize] as i64 - self.offset[b as usize] as i64 - delta as i64;
            let (span_a, span_b) = (self.span(model, sa) as i64, self.span(model, sb) as i64);
            let a_holds_b = at >= 0 && at + span_b <= span_a;
            let b_holds_a = at <= 0 && span_a - at <= span_b;
            let (outer, inner, inner_at) = match (a_holds_b, b_holds_a) {
                // Equal spans: the set with more members stays.
                (true, true)
                    if self.members[sb as usize].len() > self.members[sa as usize].len() =>
                {
                    (sb, sa, 0)
                }
                (true, _) => (sa, sb, at as u32),
                (false, true) => (sb, sa, (-at) as u32),
                (false, false) => continue,
            };
            let (co, ci) = (
                self.class[outer as usize].expect("a node"),
                self.class[inner as usize].expect("a node"),
            );
            // Every start of the outer class puts the inner set on a start of its own: a fact of
            // the two classes and the offset, found once each.
            let places = *places.entry((co, ci, inner_at)).or_insert_with(|| {
                let inner_starts = model.starts(ci);
                model
                    .starts(co)
                    .iter()
                    .all(|&r| inner_starts.binary_search(&(r + inner_at)).is_ok())
            });
            if !places {
                continue;
            }
            // Each attempt costs the two sets' lists: a set grown along a long chain of copies
            // (thousands of sequential ifs) would make coalescing quadratic, so past this many
            // neighbours a copy stays (regalloc2 bounds its bundle merges the same way).
            if self.list(outer).len() + self.list(inner).len() > COALESCE_NEIGHBOURS {
                continue;
            }
            if self.members_clash(func, graph, outer, inner, inner_at) {
                continue;
            }
            // The inner set's neighbours, then the outer set's, which stay marked; their
            // union, made into a list only for a merge.
            self.neighbours_into(inner, &mut adj_inner);
            self.neighbours_into(outer, &mut adj_outer);
            shared.clear();
            shared.extend(adj_inner.iter().map(|&u| self.marked(u)));
            let union = || {
                adj_outer.iter().copied().filter(|&u| u != inner).chain(
                    adj_inner
                        .iter()
                        .zip(&shared)
                        .filter(|&(&u, &both)| !both && u != outer)
                        .map(|(&u, _)| u),
                )
            };
            // Briggs: fewer significant neighbours than the merged set's colours (counted
            // until there are that many).
            let briggs = {
                let limit = model.p(co);
                let q = model.q_row(co);
                let mut significant = 0;
                for u in union() {
                    let Some(c) = self.class[u as usize] else {
                        continue;
                    };
                    if self.pressure[u as usize] >= model.p(c) {
                        significant += q[c.0 as usize];
                        if significant >= limit {
                            break;
                        }
                    }
                }
                significant < limit
            };
            // George: every neighbour of the inner set either already neighbours the outer one
            // or stays trivially colourable when it sees the outer set's class instead.
            let george = !briggs
                && adj_inner.iter().zip(&shared).all(|(&u, &both)| {
                    u == outer
                        || both
                        || self.class[u as usize].is_none_or(|c| {
                            self.pressure[u as usize] - model.q(c, ci) + model.q(c, co) < model.p(c)
                        })
                });
            if !briggs && !george {
                continue;
            }
            // (Room for both lists at once: a filtered chain's collect grows by doublings.)
            let mut merged = Vec::with_capacity(adj_outer.len() + adj_inner.len());
            merged.extend(union());
            self.merge(model, (outer, inner, inner_at), merged, &adj_inner, &shared);
            stats.coalesced += 1;
            stats.coalesced_george += george as u32;
            stats.coalesced_at_offset += (delta != 0) as u32;
        }
        // Vector operands no temp joined are not nodes.
        for s in n as usize..self.class.len() {
            if self.members[s].iter().all(|&m| m >= n) {
                self.class[s] = None;
            }
        }
        // The lists that name merged sets read through `rep` once more, and their pressures
        // from the exact lists (the others' lists and pressures are exact already).
        // (Sets that are no nodes keep what they hold: nothing reads it again.)
        for s in 0..self.class.len() as u32 {
            if self.class[s as usize].is_some() && self.stale[s as usize] {
                self.own[s as usize] = Some(self.neighbours(s));
            }
        }
        for s in 0..self.class.len() {
            if let Some(b) = self.class[s]
                && self.stale[s]
            {
                let q = model.q_row(b);
                self.pressure[s] = list_of(&self.own, self.base, s)
                    .iter()
                    .filter_map(|&u| self.class[u as usize])
                    .map(|c| q[c.0 as usize])
                    .sum();
            }
        }
    }

    /// Whether two members of `outer` and `inner` (placed `inner_at` units into `outer`) would
    /// share a unit while interfering. Walks the smaller set's members and their neighbours.
    fn members_clash(
        &self,
        func: &Function,
        graph: &Graph,
        outer: u32,
        inner: u32,
        inner_at: u32,
    ) -> bool {
        let place = |t: u32| {
            let base = if self.rep[t as usize] == inner {
                inner_at
            } else {
                0
            };
            let lo = base + self.offset[t as usize];
            (lo, lo + func.temps[t as usize].size as u32)
        };
        let (small, other) =
            if self.members[inner as usize].len() <= self.members[outer as usize].len() {
                (inner, outer)
            } else {
                (outer, inner)
            };
        self.temps_of(small).any(|m| {
            let (lo, hi) = place(m);
            graph.adj.of(m as usize).iter().any(|&u| {
                self.rep[u as usize] == other && {
                    let (ulo, uhi) = place(u);
                    lo < uhi && ulo < hi
                }
            })
        })
    }

    /// Merges `inner` into `outer` at `inner_at`; `merged` is the union of their neighbours
    /// (`shared[i]`: whether `adj_inner[i]` neighbours `outer` too). Other sets' lists are left
    /// as they are — an entry naming `inner` now stands for `outer` through `rep` — so a merge
    /// costs the two lists, not an edit of every neighbour's list; only pressures change.
    fn merge(
        &mut self,
        model: &mut RegModel,
        (outer, inner, inner_at): (u32, u32, u32),
        merged: Vec<u32>,
        adj_inner: &[u32],
        shared: &[bool],
    ) {
        let (co, ci) = (
            self.class[outer as usize].expect("a node"),
            self.class[inner as usize].expect("a node"),
        );
        let (q_inner, q_outer) = (model.q_against(ci), model.q_against(co));
        for (&u, &both) in adj_inner.iter().zip(shared) {
            if u == outer {
                continue;
            }
            // Its list names `inner`, which is `outer` from now on.
            self.stale[u as usize] = true;
            let cu = self.class[u as usize].expect("a neighbour in the graph").0 as usize;
            self.pressure[u as usize] -= q_inner[cu];
            if !both {
                self.pressure[u as usize] += q_outer[cu];
            }
        }
        let q = model.q_row(co);
        self.pressure[outer as usize] = merged
            .iter()
            .filter_map(|&u| self.class[u as usize])
            .map(|c| q[c.0 as usize])
            .sum();
        self.own[outer as usize] = Some(merged);
        self.own[inner as usize] = Some(Vec::new());
        let moved = std::mem::take(&mut self.members[inner as usize]);
        for &m in &moved {
            self.rep[m as usize] = outer;
            self.offset[m as usize] += inner_at;
        }
        self.members[outer as usize].extend(moved);
        self.class[inner as usize] = None;
        self.length[outer as usize] += self.length[inner as usize];
        self.order[outer as usize] = self.order[outer as usize].min(self.order[inner as usize]);
        self.weight[outer as usize] += self.weight[inner as usize];
    }

    /// The temps of set `s` (its members but vector operands' own ids).
    fn temps_of(&self, s: u32) -> impl Iterator<Item = u32> + '_ {
        self.members[s as usize]
            .iter()
            .copied()
            .filter(|&m| (m as usize) < self.temps)
    }

    /// The sets next to set `s`, once each: its list read through `rep`. They stay marked
    /// ([`Sets::marked`]) until the next call.
    fn neighbours(&mut self, s: u32) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.list(s).len());
        self.neighbours_into(s, &mut out);
        out
    }

    /// [`Sets::neighbours`] into `out`, which is cleared first.
    fn neighbours_into(&mut self, s: u32, out: &mut Vec<u32>) {
        self.stamp += 1;
        out.clear();
        for &u in list_of(&self.own, self.base, s as usize) {
            let r = self.rep[u as usize];
            if r != s && self.class[r as usize].is_some() && self.mark[r as usize] != self.stamp {
                self.mark[r as usize] = self.stamp;
                out.push(r);
            }
        }
    }

    /// Whether `u` was among the sets the last [`Sets::neighbours`] returned.
    fn marked(&self, u: u32) -> bool {
        self.mark[u as usize] == self.stamp
    }

    /// Simplify (Chaitin, with Briggs's optimistic pushing): trivially colourable sets leave
    /// the graph so that they colour in live-range or definition order
    /// (`Target::short_ranges_first`); when none is
    /// left, the set of least spill cost — Σ uses × 10^loop depth / degree — is pushed
    /// optimistically. Pressures are kept current as sets leave, so simplify is linear in the
    /// edges plus a heap operation per optimistic push.
    fn simplify(
        &mut self,
        model: &mut RegModel,
        unspillable: &[bool],
        stats: &mut ColourStats,
    ) -> Vec<u32> {
        let n = self.rep.len();
        let mut nodes = Vec::with_capacity(n);
        nodes.extend((0..n as u32).filter(|&t| self.class[t as usize].is_some()));
        // Every node is pushed at most once.
        let mut ready = Vec::with_capacity(nodes.len());
        ready.extend(nodes.iter().copied().filter(|&t| {
            self.pressure[t as usize] < model.p(self.class[t as usize].expect("a node"))
        }));
        // `ready` is a stack: what leaves the graph first colours last.
        if model.target().short_ranges_first() {
            ready.sort_unstable_by_key(|&t| self.length[t as usize]);
        } else {
            ready.sort_unstable_by_key(|&t| self.order[t as usize]);
        }
        let mut queued = vec![false; n];
        for &t in &ready {
            queued[t as usize] = true;
        }
        // Spill costs, lowest first; a set holding a temp spilling cannot help costs infinity.
        // (Made when simplify first runs out of trivially colourable sets — often never. The
        // costs read lists and weights, which simplify does not change.)
        let mut by_cost: Option<BinaryHeap<(Reverse<Cost>, u32)>> = None;
        let mut removed = vec![false; n];
        let mut stack: Vec<u32> = Vec::with_capacity(nodes.len());
        let mut left = nodes.len();
        while left > 0 {
            let t = match ready.pop() {
                Some(t) => t,
                None => {
                    let by_cost = by_cost.get_or_insert_with(|| {
                        nodes
                            .iter()
                            .map(|&t| {
                                let fixed = self
                                    .temps_of(t)
                                    .all(|m| unspillable.get(m as usize).copied().unwrap_or(false));
                                let degree = self.list(t).len().max(1) as f64;
                                let cost = if fixed {
                                    f64::INFINITY
                                } else {
                                    self.weight[t as usize] / degree
                                };
                                (Reverse(Cost(cost)), t)
                            })
                            .collect()
                    });
                    loop {
                        let (_, t) = by_cost.pop().expect("nodes are left");
                        if !removed[t as usize] {
                            stats.optimistic += 1;
                            break t;
                        }
                    }
                }
            };
            if removed[t as usize] {
                continue;
            }
            removed[t as usize] = true;
            left -= 1;
            stack.push(t);
            let q = model.q_against(self.class[t as usize].expect("a node"));
            for &u in list_of(&self.own, self.base, t as usize) {
                let u = u as usize;
                let Some(b) = self.class[u] else { continue };
                if removed[u] {
                    continue;
                }
                self.pressure[u] = self.pressure[u].saturating_sub(q[b.0 as usize]);
                if !queued[u] && self.pressure[u] < model.p(b) {
                    queued[u] = true;
                    ready.push(u as u32);
                }
            }
        }
        stack
    }

    /// Select: sets come back in reverse order. A set's blocked starts are those at which one
    /// of its members would overlap a coloured neighbour of that member; among the others, a
    /// copy partner's colour (at the partner's offset) comes first, then the target's pick
    /// (`Target::select_register`). A set with no start left is uncoloured, and its spillable
    /// members are the colouring's spills.
    fn select(
        &self,
        func: &Function,
        model: &RegModel,
        graph: &Graph,
        mut stack: Vec<u32>,
        unspillable: &[bool],
        stats: &mut ColourStats,
    ) -> Colouring {
        let mut colour: Vec<Option<u32>> = vec![None; self.rep.len()];
        let mut spill = Vec::new();
        let mut cursor = [0u32; 2];
        // Starts as bits, 64 units to a word: blocked, free, and free of the read ports taken.
        let (mut blocked, mut free, mut open) = (Vec::new(), Vec::new(), Vec::new());
        let mut taken: Vec<(u32, u8)> = Vec::new();
        // The units of every read port (`RegModel::port_bits`, found once per model).
        let port_of = |file: kiln_ir::FileId, u: u32| {
            model.port_bits(file).iter().position(|bits| {
                bits.get(u as usize / 64)
                    .is_some_and(|w| w >> (u % 64) & 1 != 0)
            })
        };
        while let Some(s) = stack.pop() {
            let c = self.class[s as usize].expect("a node");
            let class = model.class(c);
            let units = model.target().files()[class.file.index()].units;
            let words = (units as usize).div_ceil(64);
            blocked.clear();
            blocked.resize(words, 0u64);
            for m in self.temps_of(s) {
                let (om, sm) = (self.offset[m as usize], func.temps[m as usize].size as u32);
                for &u in graph.adj.of(m as usize) {
                    let ru = self.rep[u as usize];
                    let Some(cu) = colour[ru as usize] else {
                        continue;
                    };
                    let lo = cu + self.offset[u as usize];
                    let hi = lo + func.temps[u as usize].size as u32;
                    // Starts r with [r + om, r + om + sm) overlapping [lo, hi).
                    let first = (lo + 1).saturating_sub(sm + om);
                    let last = hi.saturating_sub(om).min(units);
                    for r in first..last {
                        blocked[r as usize / 64] |= 1 << (r % 64);
                    }
                }
            }
            free.clear();
            free.extend(
                model
                    .start_bits(c)
                    .iter()
                    .zip(&blocked)
                    .map(|(&s, &b)| s & !b),
            );
            if free.iter().all(|&w| w == 0) {
                stats.uncoloured += 1;
                spill.extend(
                    self.temps_of(s)
                        .filter(|&m| !unspillable.get(m as usize).copied().unwrap_or(false))
                        .map(Temp),
                );
                continue;
            }
            // Starts that put no member on a read port an operand read with it takes: per
            // member, the ports its constants and its coloured companions take, found once.
            taken.clear();
            taken.extend(self.temps_of(s).map(|m| {
                let mut ports = graph.constant_ports[m as usize];
                for &o in graph.read_with.of(m as usize) {
                    if let Some(co) = colour[self.rep[o as usize] as usize]
                        && let Some(q) = port_of(class.file, co + self.offset[o as usize])
                    {
                        ports |= 1 << q;
                    }
                }
                (self.offset[m as usize], ports)
            }));
            taken.retain(|&(_, ports)| ports != 0);
            if !taken.is_empty() {
                // A start is closed where a member's unit (start + its offset) is on a port
                // taken for that member.
                open.clear();
                open.extend_from_slice(&free);
                for &(offset, ports) in &taken {
                    for (p, bits) in model.port_bits(class.file).iter().enumerate() {
                        if ports & (1 << p) != 0 {
                            clear_shifted(&mut open, bits, offset);
                        }
                    }
                }
                if open.iter().any(|&w| w != 0) {
                    std::mem::swap(&mut free, &mut open);
                }
            }
            let has = |r: u32| {
                free.get(r as usize / 64)
                    .is_some_and(|w| w >> (r % 64) & 1 != 0)
            };
            let biased = self.temps_of(s).find_map(|m| {
                graph.partners[m as usize]
                    .iter()
                    .find_map(|&(p, delta, _)| {
                        let cp = colour[self.rep[p as usize] as usize]?;
                        let r = (cp + self.offset[p as usize]) as i64 + delta as i64
                            - self.offset[m as usize] as i64;
                        let r = u32::try_from(r).ok()?;
                        has(r).then_some(r)
                    })
            });
            colour[s as usize] = Some(
                biased.unwrap_or_else(|| model.target().select_register(class, &free, &mut cursor)),
            );
        }
        let homes = (0..func.temps.len())
            .map(|t| {
                let r = colour[self.rep[t] as usize]?;
                Some(PhysReg::new(func.temps[t].file, r + self.offset[t]))
            })
            .collect();
        spill.sort_unstable();
        Colouring {
            homes,
            spill,
            stats: ColourStats::default(),
        }
    }
}

/// Clears in `starts` (bits of start units) every start `r` whose unit `r + offset` is in
/// `units` (bits of units): `starts &= !(units >> offset)`, word by word.
fn clear_shifted(starts: &mut [u64], units: &[u64], offset: u32) {
    let (words, bits) = ((offset / 64) as usize, offset % 64);
    for (k, w) in starts.iter_mut().enumerate() {
        let lo = units.get(k + words).copied().unwrap_or(0);
        let hi = units.get(k + words + 1).copied().unwrap_or(0);
        let shifted = if bits == 0 {
            lo
        } else {
            lo >> bits | hi << (64 - bits)
        };
        *w &= !shifted;
    }
}

/// `v` followed by `fill` up to `total` entries (the vector operands' sets after the temps).
fn extended<T: Clone>(v: &[T], fill: T, total: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(v);
    out.resize(total, fill);
    out
}

/// A spill cost ordered as a number (never NaN: weights and degrees are positive).
#[derive(Clone, Copy, PartialEq, Debug)]
struct Cost(f64);

impl Eq for Cost {}

impl PartialOrd for Cost {
    fn partial_cmp(&self, other: &Cost) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Cost {
    fn cmp(&self, other: &Cost) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The most neighbours (both lists, as stored) two sets may have for a copy between them to be
/// coalesced (see `Sets::coalesce`).
const COALESCE_NEIGHBOURS: usize = 4096;

/// The interference graph and what guides colouring.
struct Graph {
    /// Neighbours of every temp, ascending.
    adj: Lists,
    /// Copy partners of every temp: (partner, unit offset that makes the copy an identity —
    /// colour(temp) = colour(partner) + offset, weight 10^loop depth of the copy).
    partners: Vec<Vec<(u32, i32, f64)>>,
    /// Instructions every temp is live across.
    length: Vec<u32>,
    /// Σ over the temp's definition and uses of 10^loop depth (the spill cost's numerator).
    weight: Vec<f64>,
    /// Position of every temp's definition in layout order (a dominance order).
    order: Vec<u32>,
    /// Vector operands of instructions (not `create_vector`, whose definition is the vector)
    /// that are more than one temp, and 10^loop depth of their instruction: their members are
    /// coalesced into one node of the vector's class, so they are coloured in place.
    groups: Vec<(VectorUse, f64)>,
    /// Temps read by one instruction with every temp (ascending), and the read ports (bits) its constant
    /// operands take there (`Target::read_port`, `Target::constant_read_port`).
    read_with: Lists,
    constant_ports: Vec<u8>,
}

/// 10^loop depth, capped so that deep nests stay finite.
fn frequency(cfg: &Cfg, b: kiln_ir::Block) -> f64 {
    10f64.powi(cfg.loop_depth(b).min(8) as i32)
}

/// Builds the interference graph, copy partners and live-range lengths of every temp.
fn build(func: &Function, cfg: &Cfg, lv: &Liveness) -> Graph {
    let n = func.temps.len();
    let file_of = |t: Temp| func.temps[t.index()].file;
    // Edges, each once in one direction with the few repeats (phi and all-lanes edges), into
    // one vector; the sorted neighbour lists are made from it at the end (`adjacency`).
    let insts: usize = func.blocks.iter().map(|b| b.insts.len()).sum();
    // (Room for a few edges and read pairs per instruction before the first growth.)
    let mut edges: Vec<(u32, u32)> = Vec::with_capacity(4 * insts);
    let mut partners: Vec<Vec<(u32, i32, f64)>> = (0..n).map(|_| Vec::new()).collect();
    let mut read_pairs: Vec<(u32, u32)> = Vec::with_capacity(insts);
    let mut constant_ports = vec![0u8; n];
    let mut length = vec![0u32; n];
    let mut weight = vec![0f64; n];
    let mut groups = Vec::new();
    let mut order = vec![u32::MAX; n];
    let insts = func.block_ids().flat_map(|b| &func.block(b).insts);
    for (position, inst) in insts.enumerate() {
        for d in &inst.defs {
            order[d.temp.index()] = position as u32;
        }
    }
    let mut live = LiveList::new(n);
    let add = |a: Temp, b: Temp, edges: &mut Vec<(u32, u32)>| {
        if a != b && file_of(a) == file_of(b) {
            edges.push((a.0, b.0));
        }
    };
    for b in func.block_ids() {
        let freq = frequency(cfg, b);
        for t in lv.live_out[b.index()].iter() {
            live.enter(t.0, -1);
        }
        let insts = &func.block(b).insts;
        for (step, inst) in insts.iter().rev().enumerate() {
            let step = step as i64;
            for t in inst.used_temps().chain(inst.defs.iter().map(|d| d.temp)) {
                weight[t.index()] += freq;
            }
            if inst.op.is_phi() {
                continue;
            }
            // Definitions interfere with what is live after them and with each other.
            for (i, d) in inst.defs.iter().enumerate() {
                let (dt, df) = (d.temp.0, file_of(d.temp));
                edges.extend(
                    live.list()
                        .iter()
                        .filter(|&&t| t != dt && func.temps[t as usize].file == df)
                        .map(|&t| (dt, t)),
                );
                for e in &inst.defs[..i] {
                    add(d.temp, e.temp, &mut edges);
                }
            }
            for d in &inst.defs {
                if let Some(steps) = live.leave(d.temp.0, step) {
                    length[d.temp.index()] += steps;
                }
            }
            // Late-kill operands are still live when the definitions are written.
            for op in inst.operands.iter().filter(|o| o.is_late_kill()) {
                if let Some(t) = op.temp_id() {
                    for d in &inst.defs {
                        add(d.temp, t, &mut edges);
                    }
                }
            }
            copy_partners(func, inst, freq, &mut partners);
            read_together(func, inst, &mut read_pairs, &mut constant_ports);
            if inst.op != Opcode::CreateVector {
                groups.extend(
                    vector_uses(func, inst)
                        .into_iter()
                        .filter(|v| match v.members[..] {
                            // One temp that is the whole vector needs no set; one beside
                            // constants does (its start is aligned, the constants' units free).
                            [(t, _)] => v.size > func.class(t).size as u32,
                            _ => true,
                        })
                        .map(|v| (v, freq)),
                );
            }
            for t in inst.used_temps() {
                live.enter(t.0, step);
            }
        }
        // Phis: defined together at the block's start, with what is live into it.
        let phis: Vec<&kiln_ir::Inst> = insts.iter().take_while(|i| i.op.is_phi()).collect();
        for (i, phi) in phis.iter().enumerate() {
            let d = phi.defs[0].temp;
            for t in lv.live_in[b.index()].iter() {
                add(d, t, &mut edges);
            }
            for other in &phis[..i] {
                add(d, other.defs[0].temp, &mut edges);
            }
            for t in phi.operands.iter().filter_map(|o| o.temp_id()) {
                partners[d.index()].push((t.0, 0, freq));
                partners[t.index()].push((d.0, 0, freq));
            }
        }
        let last = insts.len() as i64 - 1;
        while let Some(&t) = live.list().last() {
            length[t as usize] += live.leave(t, last).expect("listed");
        }
    }
    // Seed 003 and docs/ir.md: a value written in all lanes of a per-lane file interferes with
    // values live in any lane, beyond liveness: the query, asked of the candidates only.
    for (a, us) in kiln_analysis::interference::all_lanes_neighbours(func, cfg, lv)
        .iter()
        .enumerate()
    {
        let a = Temp::new(a);
        for &u in us.iter().filter(|&&u| u > a.0) {
            add(a, Temp(u), &mut edges);
        }
    }
    let adj = adjacency(n, &edges);
    let read_with = adjacency(n, &read_pairs);
    Graph {
        adj,
        partners,
        length,
        weight,
        order,
        groups,
        read_with,
        constant_ports,
    }
}

/// Lists of numbers for every node, one after another in one vector (compressed rows): one
/// allocation for the whole graph, not one per node.
#[derive(Clone, Debug, Default)]
struct Lists {
    /// `items[start[k]..start[k + 1]]` is node k's list.
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Lists {
    fn of(&self, k: usize) -> &[u32] {
        &self.items[self.start[k] as usize..self.start[k + 1] as usize]
    }

    /// Nodes.
    fn len(&self) -> usize {
        self.start.len().saturating_sub(1)
    }

    /// Entries of all lists.
    fn entries(&self) -> usize {
        self.items.len()
    }
}

/// Sorted neighbour lists without repeats from undirected `edges` over `n` nodes, by a
/// counting sort on the neighbour: each node's list is filled in ascending neighbour order in
/// its slot of one vector, and the slots are closed up over the repeats at the end —
/// O(nodes + edges), no comparison sort.
fn adjacency(n: usize, edges: &[(u32, u32)]) -> Lists {
    // start[k]..start[k + 1]: the entries whose neighbour is k (each edge is two entries).
    let mut start = vec![0u32; n + 1];
    for &(a, b) in edges {
        start[a as usize + 1] += 1;
        start[b as usize + 1] += 1;
    }
    for k in 0..n {
        start[k + 1] += start[k];
    }
    // The owner of each entry, grouped by neighbour. The graph is symmetric, so a node's
    // degree is also how many entries name it as the neighbour: `start` bounds its slot too.
    let mut owner = vec![0u32; 2 * edges.len()];
    let mut next = start.clone();
    for &(a, b) in edges {
        owner[next[b as usize] as usize] = a;
        next[b as usize] += 1;
        owner[next[a as usize] as usize] = b;
        next[a as usize] += 1;
    }
    // `next[o]`: where owner o's next neighbour goes.
    next.copy_from_slice(&start);
    let mut items = vec![0u32; owner.len()];
    for k in 0..n {
        for &o in &owner[start[k] as usize..start[k + 1] as usize] {
            // Ascending k: a repeat is the slot's last entry.
            let (from, at) = (start[o as usize], next[o as usize]);
            if at == from || items[at as usize - 1] != k as u32 {
                items[at as usize] = k as u32;
                next[o as usize] += 1;
            }
        }
    }
    // Close up the slots.
    let mut written = 0u32;
    for k in 0..n {
        let (from, to) = (start[k], next[k]);
        items.copy_within(from as usize..to as usize, written as usize);
        start[k] = written;
        written += to - from;
    }
    start[n] = written;
    items.truncate(written as usize);
    Lists { start, items }
}

/// The operands one instruction reads together (an operation, not a copy or a vector
/// instruction, whose parts are moved one by one): each pair of temps read together, and the
/// read ports its constants take.
fn read_together(
    func: &Function,
    inst: &kiln_ir::Inst,
    read_pairs: &mut Vec<(u32, u32)>,
    constant_ports: &mut [u8],
) {
    if inst.op.is_phi()
        || matches!(
            inst.op,
            Opcode::Mov | Opcode::ParallelCopy | Opcode::CreateVector | Opcode::SplitVector
        )
        || inst.operands.len() < 2
    {
        return;
    }
    let mut ports = 0u8;
    for op in &inst.operands {
        if let kiln_ir::Value::Const(c) = op.value
            && let Some(p) = func.target.constant_read_port(c)
        {
            ports |= 1 << p;
        }
    }
    for (i, a) in inst.operands.iter().enumerate() {
        let Some(a) = a.temp_id() else { continue };
        constant_ports[a.index()] |= ports;
        for b in inst.operands[..i].iter().filter_map(|o| o.temp_id()) {
            if a != b && func.temps[a.index()].file == func.temps[b.index()].file {
                read_pairs.push((a.0, b.0));
            }
        }
    }
}

/// Copy partners of one instruction, with the unit offset that makes the copy an identity:
/// `mov` and `parallel_copy` (0), the parts of `create_vector` and `split_vector` (their offset
/// in the vector), and the members of a vector operand (their offsets from each other).
fn copy_partners(
    func: &Function,
    inst: &kiln_ir::Inst,
    freq: f64,
    partners: &mut [Vec<(u32, i32, f64)>],
) {
    let mut pair = |a: Temp, b: Temp, delta: i32| {
        // colour(a) = colour(b) + delta
        partners[a.index()].push((b.0, delta, freq));
        partners[b.index()].push((a.0, -delta, freq));
    };
    let size = |t: Temp| func.temps[t.index()].size as i32;
    // A definition tied to an operand is written in that operand's register.
    for d in &inst.defs {
        if let Some(t) = d
            .tied
            .and_then(|k| inst.operands.get(k as usize))
            .and_then(|o| o.temp_id())
        {
            pair(d.temp, t, 0);
        }
    }
    match inst.op {
        // A select writes one arm's lanes only when its result is in the other arm's register
        // (one conditional move instead of two, where the target has no select): an arm that
        // dies there is a partner of the result, at half a copy's weight.
        Opcode::Sel => {
            let d = inst.defs[0].temp;
            for t in inst.operands[1..]
                .iter()
                .filter(|o| o.is_kill())
                .filter_map(|o| o.temp_id())
            {
                partners[d.index()].push((t.0, 0, freq / 2.0));
                partners[t.index()].push((d.0, 0, freq / 2.0));
            }
        }
        Opcode::Mov | Opcode::ParallelCopy => {
            for (d, op) in inst.defs.iter().zip(&inst.operands) {
                if let Some(t) = op.temp_id() {
                    pair(d.temp, t, 0);
                }
            }
        }
        Opcode::CreateVector => {
            let x = inst.defs[0].temp;
            let mut off = 0;
            for op in &inst.operands {
                if let Some(t) = op.temp_id() {
                    pair(t, x, off);
                    off += size(t);
                } else {
                    off += 1;
                }
            }
        }
        Opcode::SplitVector => {
            if let Some(x) = inst.operands.first().and_then(|o| o.temp_id()) {
                let mut off = 0;
                for d in &inst.defs {
                    pair(d.temp, x, off);
                    off += size(d.temp);
                }
            }
        }
        _ => {
            // Vector operands: each member against the first.
            let mut first: Option<(Temp, i32)> = None;
            let mut off = 0;
            for (j, op) in inst.operands.iter().enumerate() {
                let in_vector =
                    op.is_vector_aligned() || (j > 0 && inst.operands[j - 1].is_vector_aligned());
                if !in_vector {
                    first = None;
                    off = 0;
                    continue;
                }
                let w = op.temp_id().map_or(1, size);
                if let Some(t) = op.temp_id() {
                    match first {
                        Some((f, fo)) => pair(t, f, off - fo),
                        None => first = Some((t, off)),
                    }
                }
                off += w;
                if !op.is_vector_aligned() {
                    first = None;
                    off = 0;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::adjacency;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    proptest! {
        /// The counting sort gives what a set of both directions of every edge gives: each
        /// list ascending, without repeats, symmetric.
        #[test]
        fn adjacency_lists_every_neighbour_once_in_order(
            n in 1usize..40,
            raw in proptest::collection::vec((0u32..40, 0u32..40), 0..200),
        ) {
            let edges: Vec<(u32, u32)> = raw
                .into_iter()
                .map(|(a, b)| (a % n as u32, b % n as u32))
                .filter(|(a, b)| a != b)
                .collect();
            let mut expected = vec![BTreeSet::new(); n];
            for &(a, b) in &edges {
                expected[a as usize].insert(b);
                expected[b as usize].insert(a);
            }
            let adj = adjacency(n, &edges);
            prop_assert_eq!(adj.len(), n);
            for (k, want) in expected.iter().enumerate() {
                prop_assert_eq!(adj.of(k), &want.iter().copied().collect::<Vec<_>>()[..]);
            }
            prop_assert_eq!(adj.entries(), expected.iter().map(BTreeSet::len).sum::<usize>());
        }
    }
}
