"""Agent memory: bounded window, running summary, retrieval, relationships, snapshots."""

from sim.contracts.memory import Memory


def test_window_bounds_items_and_folds_old_ones_into_summary():
    m = Memory(window=3, summary_chars=60)
    for t in range(1, 8):
        m.add(t, "observation", f"caught {t} tons")
    assert [i.tick for i in m.items] == [5, 6, 7]
    assert "caught 4 tons" in m.summary and len(m.summary) <= 60


def test_retrieval_prefers_relevant_then_recent():
    m = Memory(window=10)
    m.add(1, "message", "the lake is almost empty, stop fishing", source=2)
    for t in range(2, 7):
        m.add(t, "observation", f"sunny weather day {t}")
    got = m.retrieve("is the lake empty", k=2)
    assert got[0].tick == 1 and got[1].tick == 6


def test_relationships_are_clipped_and_snapshotted():
    m = Memory()
    for _ in range(30):
        m.relate(3, -0.5)
    assert m.relationships[3] == -1.0
    snap = m.snapshot()
    assert snap["relationships"] == {"3": -1.0} and snap["items"] == []


def test_a_summary_never_outgrows_its_bound_even_a_tiny_one():
    for chars in (0, 2, 3, 4, 60):
        m = Memory(window=1, summary_chars=chars)
        for t in range(1, 30):
            m.add(t, "observation", f"caught {t} tons")
        assert len(m.summary) <= chars and [i.tick for i in m.items] == [29]
    assert Memory(window=1, summary_chars=0).render() == ""
