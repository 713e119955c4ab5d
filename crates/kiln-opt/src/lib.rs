//! kiln's middle end (DESIGN.md §1): a dataflow framework and the passes that clean up what the
//! front end hands over, one module per pass, each run through a `kiln_analysis::Context`.

pub mod dataflow;
