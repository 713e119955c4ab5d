//! kiln-sched: the dependency DAG of a block ([`dag`]) and the list scheduler that orders its
//! nodes cycle by cycle, issuing two at once where the target can pair them ([`list`]). The
//! target says what each node reads and writes ([`Access`]) and which pairs it can issue
//! together; everything else is here. After seed 002's scheduler and Mesa's
//! `vc4_qpu_schedule.c`; the design is in `docs/sched.md`.

pub mod bound;
pub mod dag;
pub mod list;
pub mod optimal;
pub mod pressure;

pub use dag::{Access, Dag, Edge};
pub use list::{Registers, Slot, schedule, schedule_within};
