//! The one integration-test binary: every test runs the real `cestore` binary
//! in a fresh temporary directory.

mod util;
