//! Lock profiling end to end: threads contending for a monitor and a
//! ReentrantLock, each summing its own waiting time (tests/java/LockContention.java).

mod common;

use common::*;

#[test]
fn every_contended_acquisition_at_lock_0() {
    check_lock_sites(&java(), "0", "JDK 17");
}

#[test]
fn a_threshold_keeps_the_estimate_unbiased() {
    check_lock_sites(&java(), "2ms", "JDK 17");
}

#[test]
fn bad_lock_options_are_refused_in_one_line() {
    let s = Scratch::new("lock-bad");
    let o = run_java(&s.0, "lock=abc", &[], &s.0, &["-version"]);
    assert_refused(&o, "lock=abc", "invalid agent option 'lock=abc'");
}
