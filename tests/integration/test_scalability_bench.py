"""``python -m bench scalability`` (ICML 2019 Figure 2b, pgmjax against mbi 2.0): its page names the iteration
count the run used, and results written before the count was recorded read as the 50 they ran."""

from __future__ import annotations

from bench import scalability


def _result(**meta):
    env = {"cpu": "cpu", "cores": 2, "backend": "cpu", "date": "d", "python": "3", "jax": "j", "jaxlib": "j",
           "optax": "o", "numpy": "n"}
    row = {"d": 10, "engine": "pgmjax", "jt_build_s": 0.01, "plan_build_s": 0.02, "compile_s": 1.0,
           "sec_per_iter": 2e-4, "final_loss": 5.0, "mean_l1_error_per_record": 0.3, "noisy_l1_error_per_record": 0.8}
    return {"meta": {**env, **meta}, "rows": [row]}


def test_the_page_names_the_iterations_it_ran():
    page = scalability.render(_result(iters=20))
    assert "20-iteration blocks" in page and "/ 20." in page and "loss after 20 it." in page
    assert "50" not in page
    assert "| 10 | pgmjax | 0.030 | 1.00 | 0.20 | 5 | 0.300 (0.800) |" in page


def test_an_older_result_without_the_count_reads_as_fifty():
    assert "loss after 50 it." in scalability.render(_result())
