"""The fitted catalogue: integrity, and the temperature and task regularities read from it."""

from __future__ import annotations

from specsim.acceptance.priors import MAX_DEPTH, load_catalogue, lookup


def test_catalogue_loads_every_entry_sourced_and_unique() -> None:
    cat = load_catalogue()
    assert cat.raw_count >= 1179  # 1,178 researched entries + the suffix-decoding entry
    assert len(cat.entries) >= 1170  # all but the Medusa head accuracies (not acceptance)
    ids = [e.id for e in cat.entries]
    assert len(ids) == len(set(ids))
    assert all(e.source for e in cat.entries)
    for e in cat.entries:
        assert len(e.rates) == MAX_DEPTH and all(0.0 <= r <= 0.98 for r in e.rates), e.id



def test_temperature_and_task_regularities_from_the_catalogue() -> None:
    """Read from paired entries, matching the research notes: EAGLE-family heads keep ~0.85-0.90 of
    (tau - 1) from T=0 to T=1, Vicuna-68M-style draft models ~0.66; code accepts more than chat for heads,
    summarisation and QA less; prompt lookup's best tasks are not chat's."""
    cat = load_catalogue()
    assert 0.83 <= cat.temperature_ratio["head"] <= 0.91 and cat.temperature_pairs["head"] >= 50
    assert 0.6 <= cat.temperature_ratio["draft_model"] <= 0.72
    head = cat.task_factor["head"]
    assert head["code"] > 1.1 > 1.0 > head["summarisation"] > head["qa"]
    t0 = lookup("eagle2", target="vicuna-13b", task="mt-bench", temperature=0.0, shape=5)
    t1 = lookup("eagle2", target="vicuna-13b", task="mt-bench", temperature=1.0, shape=5)
    assert t1.tau_for(5) < t0.tau_for(5)
