//! kiln IR.
