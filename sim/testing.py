"""Public: the conformance kit, `from sim.testing import check_scenario` (it lives in `societas.testing`, with the
other faces, and runs as `societas check`; this address re-exports it)."""

from societas.testing import (
    RULES,
    ConformanceError,
    ConformanceReport,
    FakeLLM,
    check_probes,
    check_scenario,
    fake_llm_backends,
    probe_failures,
    run_checks,
)

__all__ = ["check_scenario", "run_checks", "check_probes", "probe_failures", "RULES", "ConformanceError",
           "ConformanceReport", "FakeLLM", "fake_llm_backends"]
