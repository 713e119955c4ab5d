//! kiln analyses.
