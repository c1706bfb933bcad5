//! The one integration-test binary: every test runs the real `cestore` binary
//! in a fresh temporary directory.

mod util;

mod answers;
mod architecture;
mod attest_store;
mod audit;
mod bounds;
mod cli;
mod conformance;
mod contract;
mod environment;
mod exact;
mod fulldisk;
mod gen;
mod git;
mod hardening;
mod json;
mod kept;
mod key_files;
mod large_remote;
mod mounts;
mod next_step;
mod provenance;
mod proxy;
mod races;
mod readme;
mod recovery;
mod remote;
mod rules;
mod runtime;
mod secrets;
mod signals;
mod signing;
mod substitute;
mod tree_git;
mod tree_trust;
mod tree_views;
mod trees;
mod upkeep;
mod urls;
mod views;
mod width;
mod wire;
