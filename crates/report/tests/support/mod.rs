//! Test support shared by the integration tests (each test file is its own crate and includes
//! this module with `mod support;`).

// Each test crate uses part of the fixture, so the rest would warn as dead code in that crate.
#![allow(dead_code)]

pub mod fixture;
