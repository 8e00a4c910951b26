"""A training run's curves (trainer/curves.py)."""

from __future__ import annotations

from trace_gym.trainer.curves import plot_curves


def test_curves_draw_success_reward_and_each_checks_pass_rate(tmp_path):
    import matplotlib.image

    rows = [{"iteration": i, "reward/mean": 0.1 * i, "reward/hint_free_pass_rate": 0.05 * i,
             "checks/database": 0.2 * i, "checks_passed/database": 0.2 * i, "checks/refusal": 0.0,
             "checks_passed/refusal": 1.0 - 0.1 * i} for i in range(5)]
    png = plot_curves(rows, tmp_path / "sub" / "curves.png", "GRPO on trace/x-v0")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    def image(changed: dict, name: str):
        return matplotlib.image.imread(plot_curves([{**r, **changed} for r in rows], tmp_path / name, "GRPO on trace/x-v0"))

    same = matplotlib.image.imread(png)
    assert (image({"checks_passed/database": 0.0}, "a.png") != same).any()  # a check's pass rate is drawn
    assert (image({"reward/hint_free_pass_rate": 1.0}, "b.png") != same).any()  # so is success
    assert (image({"checks/database": 0.7}, "c.png") == same).all()  # credit only where pass rates are absent
    old = [{k: v for k, v in r.items() if not k.startswith("checks_passed/")} for r in rows]
    assert plot_curves(old, tmp_path / "old.png", "t").is_file()
