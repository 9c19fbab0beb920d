"""scripts/mutation_sample.py's plan and draw (issue 30): every module of the four
mutated packages is planned or excluded with a reason, every planned file exists,
and the pooled draw is uniform over mutants, not over modules."""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("mutation_sample", ROOT / "scripts" / "mutation_sample.py")
ms = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ms)

PACKAGES = ("kernels", "harness/analysis", "harness/gate", "harness/store")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_the_package_is_planned_or_excluded_with_a_reason(package):
    on_disk = {p.relative_to(ROOT).as_posix() for p in (ROOT / package).glob("*.py")}
    planned = set(ms.package_modules(package))
    excluded = {m for m in ms.NOT_PLANNED if m.startswith(package + "/")}
    assert on_disk == planned | excluded, sorted(on_disk ^ (planned | excluded))
    assert not planned & excluded
    assert all(ms.NOT_PLANNED[m].strip() for m in excluded)


def test_every_planned_module_and_test_file_exists():
    missing = [f for module, (tests, _) in ms.PLAN.items() for f in (module, *tests) if not (ROOT / f).is_file()]
    assert missing == []


def test_package_modules_matches_the_folder_not_a_prefix_of_a_name():
    assert "harness/gate/decide.py" in ms.package_modules("harness/gate")
    assert ms.package_modules("harness/gat") == []
    assert ms.package_modules("kernels/") == ms.package_modules("kernels")


def test_the_draw_is_uniform_over_pooled_mutants():
    # one module with 900 mutants, one with 100: about 90% of the draws come from
    # the first. A draw of n per module (the mistake) would give 50%.
    pools = [[f"a{i}" for i in range(900)], [f"b{i}" for i in range(100)]]
    counts = Counter()
    for seed in range(200):
        kept = ms.draw(pools, 20, seed)
        assert sum(len(k) for k in kept) == 20
        assert kept[0] <= set(pools[0]) and kept[1] <= set(pools[1])
        counts.update({0: len(kept[0]), 1: len(kept[1])})
    share = counts[0] / (counts[0] + counts[1])
    assert 0.87 < share < 0.93


def test_the_draw_is_seeded_and_takes_everything_when_the_pool_is_small():
    pools = [[f"a{i}" for i in range(50)], ["b0", "b1"]]
    assert ms.draw(pools, 10, 3) == ms.draw(pools, 10, 3)
    assert ms.draw(pools, 10, 3) != ms.draw(pools, 10, 4)
    assert ms.draw(pools, 100, 0) == [set(pools[0]), set(pools[1])]
    assert ms.draw([[], ["x"]], 5, 0) == [set(), {"x"}]


def test_the_budget_is_split_by_share_of_the_sample():
    assert ms.split_budget(100.0, [3, 1]) == [75.0, 25.0]
    assert ms.split_budget(100.0, [0, 2]) == [0.0, 100.0]
    assert ms.split_budget(100.0, [0, 0]) == [0.0, 0.0]


def test_annotations_are_found_only_under_postponed_evaluation():
    with_future = "from __future__ import annotations\ndef f(x: int | None) -> str:\n    y: float = 1\n"
    assert len(ms.annotation_spans(with_future)) == 3
    assert ms.annotation_spans(with_future.split("\n", 1)[1]) == []


def test_the_pool_order_is_by_mutant_not_by_cosmic_rays_random_job_id():
    # two inits of the same source: same mutants, fresh job ids. The seeded draw
    # must pick the same mutants (by what they are) from both.
    import uuid
    from types import SimpleNamespace

    specs = [("m.py", (line, 4), (line, 5), op, occ) for line in range(1, 30) for op in ("A", "B") for occ in (0, 1)]

    def init():
        items = [
            SimpleNamespace(
                job_id=uuid.uuid4().hex,
                mutations=[SimpleNamespace(module_path=p, start_pos=a, end_pos=b, operator_name=o, occurrence=c)],
            )
            for p, a, b, o, c in specs
        ]
        by_job = {i.job_id: i for i in items}
        pool = [i.job_id for i in sorted(items, key=ms.mutant_key)]
        (kept,) = ms.draw([pool], 10, 7)
        return {ms.mutant_key(by_job[j]) for j in kept}

    first = init()
    assert all(init() == first for _ in range(5))
    assert len(first) == 10
