"""``Accountant.exponential_parallel`` on a 2-D array of scores: one vectorised draw per part, the exact law, the
ledger's count (``fixed_parts``), and errors that name the part."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from pgmjax.privacy import Accountant
from pgmjax.privacy import discrete_noise as dn


def test_each_row_is_drawn_from_the_exponential_mechanisms_law():
    # 3,000 parts with the same two score vectors alternating: each part's picks follow exp(eps q / 2) exactly
    # (brute force), in one call.
    q1, q2 = np.array([0.0, -1.0, -3.0]), np.array([-2.0, 0.0, -np.inf])
    eps, draws = 1.5, 3000
    acc = Accountant(epsilon=eps)
    picks = acc.exponential_parallel(jax.random.key(0), np.array([q1, q2] * draws), 1.0, epsilon=eps)
    assert isinstance(picks, np.ndarray) and picks.shape == (2 * draws,)
    for j, q in enumerate((q1, q2)):
        p = np.exp(eps * q / 2) / np.exp(eps * q / 2).sum()
        freq = np.bincount(picks[j::2], minlength=len(q)) / draws
        assert np.all(np.abs(freq - p) <= 5 * np.sqrt(p * (1 - p) / draws) + 1e-12), (freq, p)
    assert not np.any(picks[1::2] == 2)  # an excluded candidate is never drawn
    assert acc.spent == pytest.approx(eps) and len(acc.ledger) == 1 and acc.ledger[0].count == 1


def test_fixed_parts_cost_one_draw_under_replace_one_neighbours():
    q = np.zeros((5, 4))
    by_value = Accountant(epsilon=2.0, bounded=True)
    by_value.exponential_parallel(jax.random.key(1), q, 1.0, epsilon=0.5)
    assert by_value.spent == pytest.approx(1.0) and by_value.ledger[0].count == 2
    by_position = Accountant(epsilon=2.0, bounded=True)
    by_position.exponential_parallel(jax.random.key(1), q, 1.0, epsilon=0.5, fixed_parts=True)
    assert by_position.spent == pytest.approx(0.5) and by_position.ledger[0].count == 1
    with pytest.raises(TypeError, match="fixed_parts"):
        by_position.exponential_parallel(jax.random.key(1), q, 1.0, epsilon=0.5, fixed_parts=1)


def test_bad_rows_are_refused_by_part_before_any_spending():
    acc = Accountant(epsilon=1.0)
    with pytest.raises(ValueError, match="part 1 is excluded"):
        acc.exponential_parallel(jax.random.key(0), np.array([[0.0, 1.0], [-np.inf, -np.inf]]), 1.0, epsilon=0.5)
    with pytest.raises(ValueError, match="nan or"):
        acc.exponential_parallel(jax.random.key(0), np.array([[0.0, np.nan]]), 1.0, epsilon=0.5)
    with pytest.raises(ValueError, match="at least one"):
        acc.exponential_parallel(jax.random.key(0), np.zeros((0, 3)), 1.0, epsilon=0.5)
    with pytest.raises(ValueError, match="2-D array"):
        acc.exponential_parallel(jax.random.key(0), np.zeros(3), 1.0, epsilon=0.5)
    assert acc.spent == 0 and not acc.ledger


def test_rows_sampler_ends_when_one_candidate_is_far_ahead():
    # Gaps of 40 (probability about e^-40 each) and an excluded candidate: most proposals are refused, the sampler
    # still ends, and every row picks the best.
    g = np.array([[0.0, 40.0, 40.0, np.inf]] * 200)
    picks = dn.exponential_choice_rows(dn.generator(jax.random.key(3)), g)
    assert np.all(picks == 0)
