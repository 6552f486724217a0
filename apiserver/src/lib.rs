//! The kemu API server (in progress).
