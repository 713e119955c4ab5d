//! The dependency DAG of a block: read-after-write, write-after-read and write-after-write
//! edges on numbered resources (registers, flags, FIFOs: whatever the target names), built in
//! one forward walk that keeps, per resource, its last writer and the readers since (seed 002;
//! Mesa's `calculate_deps`, whose backward walk is the write-after-read half done here by the
//! reader lists). Time and space are linear in the accesses.

use smallvec::SmallVec;

/// What a node does to one resource.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Reads `resource`, no sooner than `after` cycles after its last write (0: as soon as the
    /// writer says).
    Read { resource: u32, after: u8 },
    /// Writes `resource`: readers wait `latency` cycles, the next writer `waw`, and the write
    /// may issue `war` cycles after an earlier reader (0: in the same instruction, which reads
    /// before it writes). `delay` is the wait the scheduler should hide without it being
    /// required (a texture lookup), used for priorities only.
    Write {
        resource: u32,
        latency: u8,
        waw: u8,
        war: u8,
        delay: u16,
    },
}

/// An edge to a later node: it issues at least `latency` cycles after this one, and should
/// `delay` cycles after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Edge {
    pub to: u32,
    pub latency: u8,
    pub delay: u16,
}

/// Nodes in their original order (every edge goes forward) with their successors.
#[derive(Clone, Debug, Default)]
pub struct Dag {
    /// A node's successors: a few each, kept inline.
    pub succs: Vec<SmallVec<[Edge; 4]>>,
    pub preds: Vec<u32>,
}

impl Dag {
    /// The DAG of nodes whose accesses `accesses` lists in order, over `resources` resources.
    pub fn build<'a>(accesses: impl IntoIterator<Item = &'a [Access]>, resources: usize) -> Dag {
        // Per resource: the last writer with its latencies, and the readers since — a list
        // per resource in one vector (first and last entry, each entry's next), in the order
        // they read.
        const END: u32 = u32::MAX;
        let mut last: Vec<Option<(u32, u8, u8, u16)>> = vec![None; resources];
        let mut readers: Vec<(u32, u32)> = vec![(END, END); resources];
        let mut entries: Vec<(u32, u32)> = Vec::new();
        let mut dag = Dag::default();
        let accesses = accesses.into_iter();
        dag.succs.reserve(accesses.size_hint().0);
        dag.preds.reserve(accesses.size_hint().0);
        for (n, list) in accesses.enumerate() {
            let n = n as u32;
            dag.succs.push(SmallVec::new());
            dag.preds.push(0);
            for a in list {
                if let Access::Read { resource, after } = *a {
                    let r = resource as usize;
                    if let Some((w, latency, _, delay)) = last[r] {
                        dag.edge(w, n, latency.max(after), delay);
                    }
                    let e = entries.len() as u32;
                    entries.push((n, END));
                    match readers[r] {
                        (END, _) => readers[r] = (e, e),
                        (first, tail) => {
                            entries[tail as usize].1 = e;
                            readers[r] = (first, e);
                        }
                    }
                }
            }
            for a in list {
                if let Access::Write {
                    resource,
                    latency,
                    waw,
                    war,
                    delay,
                } = *a
                {
                    let r = resource as usize;
                    let mut e = readers[r].0;
                    while e != END {
                        let (reader, next) = entries[e as usize];
                        if reader != n {
                            dag.edge(reader, n, war, war as u16);
                        }
                        e = next;
                    }
                    readers[r] = (END, END);
                    if let Some((w, _, last_waw, _)) = last[r]
                        && w != n
                    {
                        dag.edge(w, n, last_waw, last_waw as u16);
                    }
                    last[r] = Some((n, latency, waw, delay.max(latency as u16)));
                }
            }
        }
        dag
    }

    fn edge(&mut self, from: u32, to: u32, latency: u8, delay: u16) {
        self.succs[from as usize].push(Edge { to, latency, delay });
        self.preds[to as usize] += 1;
    }

    pub fn len(&self) -> usize {
        self.succs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.succs.is_empty()
    }

    /// Per node, the longest `delay` path from it to the end of the block, itself counted as 1:
    /// the list scheduler's priority (seed 002: "longest latency path to the block end").
    pub fn critical_path(&self) -> Vec<u32> {
        let mut prio = vec![1u32; self.len()];
        for n in (0..self.len()).rev() {
            for e in &self.succs[n] {
                prio[n] = prio[n].max(prio[e.to as usize] + (e.delay as u32).max(1));
            }
        }
        prio
    }
}

/// A random node's accesses, for tests: a few of `resources` resources read or written
/// (reads first, one write of each), latencies 1–3, a write after a read in the read's cycle
/// or the next.
#[cfg(test)]
pub(crate) fn random_node(
    resources: u32,
) -> impl proptest::strategy::Strategy<Value = Vec<Access>> {
    use proptest::prelude::*;
    prop::collection::vec((0..resources, any::<bool>(), 1u8..4, 0u8..2), 0..4).prop_map(|v| {
        let mut reads: Vec<Access> = Vec::new();
        let mut writes: Vec<Access> = Vec::new();
        for (resource, write, latency, war) in v {
            if !write {
                reads.push(Access::Read { resource, after: 0 });
            } else if !writes
                .iter()
                .any(|a| matches!(a, Access::Write { resource: r, .. } if *r == resource))
            {
                writes.push(Access::Write {
                    resource,
                    latency,
                    waw: 1,
                    war,
                    delay: 0,
                });
            }
        }
        reads.extend(writes);
        reads
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(resource: u32, latency: u8) -> Access {
        Access::Write {
            resource,
            latency,
            waw: 1,
            war: 0,
            delay: 0,
        }
    }
    fn r(resource: u32) -> Access {
        Access::Read { resource, after: 0 }
    }

    #[test]
    fn edges_of_each_kind() {
        // 0: write x; 1: read x; 2: write x; 3: read x, write y.
        let nodes: Vec<Vec<Access>> = vec![
            vec![w(0, 2)],
            vec![r(0)],
            vec![w(0, 2)],
            vec![r(0), w(1, 1)],
        ];
        let dag = Dag::build(nodes.iter().map(Vec::as_slice), 2);
        let e = |from: usize| -> Vec<(u32, u8)> {
            let mut v: Vec<_> = dag.succs[from].iter().map(|e| (e.to, e.latency)).collect();
            v.sort();
            v
        };
        assert_eq!(
            e(0),
            vec![(1, 2), (2, 1)],
            "read after write, write after write"
        );
        assert_eq!(e(1), vec![(2, 0)], "write after read");
        assert_eq!(e(2), vec![(3, 2)]);
        assert_eq!(dag.preds, vec![0, 1, 2, 1]);
        assert_eq!(dag.critical_path(), vec![6, 4, 3, 1]);
    }
}
