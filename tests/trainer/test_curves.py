"""A training run's curves (trainer/curves.py)."""

from __future__ import annotations

from trace_gym.trainer.curves import plot_curves


def test_curves_draw_success_reward_and_each_check(tmp_path):
    import matplotlib.image

    rows = [{"iteration": i, "reward/mean": 0.1 * i, "reward/hint_free_pass_rate": 0.05 * i,
             "checks/database": 0.2 * i, "checks/refusal": 1.0 - 0.1 * i} for i in range(5)]
    png = plot_curves(rows, tmp_path / "sub" / "curves.png", "GRPO on trace/x-v0")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    flat = plot_curves([{**r, "checks/database": 0.0} for r in rows], tmp_path / "flat.png", "GRPO on trace/x-v0")
    # another check's line is another picture
    assert (matplotlib.image.imread(png) != matplotlib.image.imread(flat)).any()
