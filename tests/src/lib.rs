//! Helpers shared by the integration tests.
pub mod samples;
pub mod world;
