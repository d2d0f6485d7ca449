"""The scenario registry: a stable name for every scenario class.

Adding a scenario = one module (or package) with a `SocietyModel` subclass, plus one line here.
"""

from __future__ import annotations

from sim.errors import UsageError
from sim.model import SocietyModel
from scenarios.commons import CommonsModel
from scenarios.donor import DonorModel
from scenarios.market import MarketModel
from scenarios.social import SocialModel

REGISTRY: dict[str, type[SocietyModel]] = {
    CommonsModel.name: CommonsModel,
    DonorModel.name: DonorModel,
    MarketModel.name: MarketModel,
    SocialModel.name: SocialModel,
}


def get_scenario(name: str) -> type[SocietyModel]:
    """The scenario class registered under `name`, or a UsageError naming the valid ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown scenario {name!r}; valid: {', '.join(sorted(REGISTRY))}") from None
