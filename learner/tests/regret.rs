//! The choice rules: regret, minimax over aliases, the 1% tie band, eligibility.

use vnni_learner::regret::{minimax_winner, regrets, Measured, REGRET_CAP};

#[test]
fn the_winner_minimizes_the_worst_alias() {
    // c0 is best on alias A, c1 on alias B, c2 is never best but never bad.
    let a = [0.0, 0.10, 0.02];
    let b = [0.20, 0.0, 0.03];
    assert_eq!(minimax_winner(&[&a, &b], |_| true), Some(2));
    // One alias alone picks its own winner.
    assert_eq!(minimax_winner(&[&a], |_| true), Some(0));
    assert_eq!(minimax_winner(&[&b], |_| true), Some(1));
}

#[test]
fn within_one_percent_the_registry_order_wins() {
    assert_eq!(minimax_winner(&[&[0.009, 0.0]], |_| true), Some(0));
    assert_eq!(minimax_winner(&[&[0.011, 0.0]], |_| true), Some(1));
    // Later candidates in the band never displace an earlier one.
    assert_eq!(minimax_winner(&[&[0.03, 0.005, 0.0]], |_| true), Some(1));
}

#[test]
fn the_mean_breaks_a_tie_on_the_worst_alias() {
    // Equal worst case, but c1 is much better on average: the band covers both scores.
    let a = [0.05, 0.05];
    let b = [0.05, 0.0];
    assert_eq!(minimax_winner(&[&a, &b], |_| true), Some(1));
}

#[test]
fn wrong_bits_never_win() {
    let fast_but_wrong = Some(Measured { median_us: 1.0, eligible: false });
    let ok = |m| Some(Measured { median_us: m, eligible: true });
    let q4_1 = regrets(&[fast_but_wrong, ok(10.0), ok(10.5)]);
    let q4_k = regrets(&[ok(5.0), ok(10.0), ok(10.5)]);
    assert_eq!(q4_1[0], REGRET_CAP);
    // c0 is twice as fast on Q4_K, but wrong on Q4_1: the key (codebook u4) never picks it.
    assert_eq!(minimax_winner(&[&q4_1, &q4_k], |_| true), Some(1));
    // No eligible allowed candidate: no winner.
    assert_eq!(minimax_winner(&[&q4_1], |c| c == 0), None);
    assert_eq!(minimax_winner(&[&q4_1], |c| c != 1), Some(2));
}
