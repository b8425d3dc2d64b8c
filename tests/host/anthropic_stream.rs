//! Anthropic Messages stream conformance (being written).
