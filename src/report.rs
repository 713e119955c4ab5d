//! Statistics in words and JSON: what one allocation did.

use kiln_regalloc::RaStats;
use std::fmt::Write as _;

/// An allocation's statistics as JSON, per-file figures by file name.
pub fn allocation_json(s: &RaStats, files: &[String]) -> serde_json::Value {
    let per_file = |values: &[u32]| -> serde_json::Value {
        files
            .iter()
            .zip(values)
            .map(|(f, v)| (f.clone(), serde_json::Value::from(*v)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    };
    serde_json::json!({
        "instructions_before": s.insts_before,
        "instructions_after": s.insts_after,
        "parallel_copies": s.parallel_copies,
        "copied_units": s.copied_units,
        "spills": s.spills,
        "reloads": s.reloads,
        "remats": s.remats,
        "spill_slots": s.spill_slots,
        "split_edges": s.split_edges,
        "graph_nodes": s.graph_nodes,
        "graph_edges": s.graph_edges,
        "coalesced": s.coalesced,
        "uncoloured": s.uncoloured,
        "spill_rounds": s.spill_rounds,
        "graph_fallback": s.graph_fallback,
        "retries": s.retries,
        "preferences_swapped": s.preferences_swapped,
        "registers_used": per_file(&s.registers_used),
        "max_demand": per_file(&s.max_demand),
        "time_spill_us": s.time_spill.as_micros() as u64,
        "time_assign_us": s.time_assign.as_micros() as u64,
        "time_check_us": s.time_check.as_micros() as u64,
    })
}

/// An allocation's statistics as text.
pub fn allocation_text(s: &RaStats, files: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "instructions   {} -> {}",
        s.insts_before, s.insts_after
    );
    let _ = writeln!(
        out,
        "copies         {} parallel copies moving {} units",
        s.parallel_copies, s.copied_units
    );
    let _ = writeln!(
        out,
        "spilling       {} spills, {} reloads, {} rematerialised, {} slots",
        s.spills, s.reloads, s.remats, s.spill_slots
    );
    if s.preferences_swapped || s.retries > 0 {
        let _ = writeln!(
            out,
            "no register    {}{} spilled again at a lower budget",
            if s.preferences_swapped {
                "assigned again with other preferences, "
            } else {
                ""
            },
            s.retries
        );
    }
    for (f, name) in files.iter().enumerate() {
        let _ = writeln!(
            out,
            "file {name:<9} {} registers used, maximum demand {}",
            s.registers_used.get(f).copied().unwrap_or(0),
            s.max_demand.get(f).copied().unwrap_or(0)
        );
    }
    if s.graph_nodes > 0 {
        let _ = writeln!(
            out,
            "colouring      {} nodes, {} edges, {} copies coalesced, {} uncoloured, {} rounds of spilling{}",
            s.graph_nodes,
            s.graph_edges,
            s.coalesced,
            s.uncoloured,
            s.spill_rounds,
            if s.graph_fallback {
                " (then the SSA spiller)"
            } else {
                ""
            }
        );
    }
    let _ = writeln!(
        out,
        "time           spill {:?}, assign {:?}, check {:?}",
        s.time_spill, s.time_assign, s.time_check
    );
    out
}
