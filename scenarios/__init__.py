"""The scenarios: one package each (commons, donor, market, social) and the registry of their stable names.

    from scenarios import get_scenario, register, REGISTRY
"""

from scenarios.registry import (BUILTIN, REGISTRY, find_scenario, get_scenario, is_reference, reference_of, register,
                                register_strategy)
from sim.core.refs import load_strategy

__all__ = ["REGISTRY", "BUILTIN", "get_scenario", "find_scenario", "reference_of", "register", "register_strategy",
           "is_reference", "load_strategy"]
