//! The one integration-test binary: every test runs the real `cestore` binary
//! in a fresh temporary directory.

mod util;

mod audit;
mod cli;
mod conformance;
mod gen;
mod hardening;
mod json;
mod mounts;
mod remote;
mod rules;
mod views;
