//! Workers AI mapping (being written).
