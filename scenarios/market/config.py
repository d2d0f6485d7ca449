"""The market's config: which market (synthetic or a Magentic folder), who plays each side, search and latency,
and the Magentic protocol's switches (what a customer's assistant is told, the search tool, the business prompt,
what an offer holds and how it is priced)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

from pydantic import Field, field_validator, model_validator

from scenarios.market import data as mdata
from scenarios.market import templates as tpl
from scenarios.market.search import ALGORITHMS
from scenarios.market.strategies import BUSINESS_STRATEGIES, CUSTOMER_STRATEGIES
from sim.core.spec import check_llm_block
from sim.tick.config import ScenarioConfig

CustomerStrategy = Literal[CUSTOMER_STRATEGIES]  # type: ignore[valid-type]
BusinessStrategy = Literal[BUSINESS_STRATEGIES]  # type: ignore[valid-type]
ManipulationKind = Literal[tuple(tpl.MANIPULATIONS)]  # type: ignore[valid-type]
SearchAlgorithm = Literal[ALGORITHMS]  # type: ignore[valid-type]


class MarketConfig(ScenarioConfig):
    """Config of the market; every field can be set with `--set key=value`."""

    path_fields: ClassVar[tuple[str, ...]] = ("market", "data_dir")
    later_fields: ClassVar[tuple[str, ...]] = ("customer_llm", "business_llm")

    market: str = Field(
        mdata.SYNTHETIC, description="`synthetic`, a market name under data_dir (e.g. mexican_10_30) or a folder path")
    data_dir: Optional[str] = Field(
        None, description="folder of named markets (default: $SOCIETAS_DATA_DIR, else ../shared/data/magentic)")
    customers_n: int = Field(10, ge=1, le=100_000, description="synthetic market: number of customers")
    businesses_n: int = Field(30, ge=1, le=300_000, description="synthetic market: number of businesses")
    customers: CustomerStrategy = Field("optimal", description="scripted customers: optimal, first, cheapest, random_match")
    businesses: BusinessStrategy = Field("honest", description="scripted businesses: honest, discount, manipulative")
    manipulative_n: int = Field(
        0, ge=0, le=300_000, description="the first n businesses play `manipulative` whatever `businesses` says")
    manipulation: ManipulationKind = Field(
        "prompt_injection", description="claim a manipulative business adds to its description")
    search: SearchAlgorithm = Field("lexical", description="search algorithm: optimal, lexical, simple, random")
    bandwidth: int = Field(10, ge=1, le=1000, description="most search results per customer")
    max_steps: int = Field(10, ge=1, le=1000, description="ticks a customer may act before it stops (the run's horizon)")
    latency: Literal["random", "rating", "order", "equal"] = Field(
        "random", description="business response delay: random (seeded), rating (best first), order (file order), "
                              "equal (then search rank decides)")
    latency_max: float = Field(2.0, ge=0.0, le=100.0, description="delays lie in [0, latency_max) ticks")
    llm_side: Literal["both", "customers", "businesses"] = Field(
        "both", description="with --policy llm: which side the LLM plays (the other is scripted)")
    customer_llm: Optional[dict[str, Any]] = Field(
        None, description="with --policy llm: the model the customers' assistants play, llm settings over the run's "
                          "(Magentic's cross-model matrix: one model per side); none: the run's llm")
    business_llm: Optional[dict[str, Any]] = Field(
        None, description="with --policy llm: the model the businesses play, llm settings over the run's; none: the run's llm")
    baseline_draws: Optional[int] = Field(None, ge=1, le=100_000, description="seeded draws for the median random-match "
                                          "baselines (default: 20,000, fewer past 2,000 customers, at least 200)")
    customer_view: Literal["values", "request", "magentic"] = Field(
        "values", description="what an LLM customer's assistant is told: values (item values, required amenities and the "
                              "utility rule), request (the request text only, as Magentic's assistant) or magentic (the "
                              "request inside Magentic's own assistant text: its tools, shopping strategy and notes)")
    customer_search: bool = Field(False, description="customers write their own search query (Magentic's search tool; "
                                  "lexical results for it) instead of the platform searching their request")
    offer_notes: bool = Field(True, description="offers are shown with \"(missing: ...)\" when incomplete (Magentic's are not)")
    menu_prompt: bool = Field(False, description="an LLM business sees its menu and each customer's message (Magentic's), "
                              "not a menu total of the requested items per inquiry")
    offer_items: Literal["request", "message"] = Field(
        "request", description="what a business's offer holds: request (the customer's requested items it sells, read "
                               "from the request) or message (the menu items the customer's message names, one of each; "
                               "a message that names none gets a text reply: Magentic's business composes its proposal "
                               "from the conversation)")
    offer_amenities: Literal["listed", "asked"] = Field(
        "listed", description="what a customer learns of a business's amenities: listed (every offer lists them) or asked "
                              "(the business answers Yes or No for the amenities the customer's message names, and says "
                              "nothing of the others: Magentic's customer must ask)")
    pricing: Literal["decide", "menu"] = Field(
        "decide", description="decide: each business picks the percentage of its menu prices it charges each round (its "
                              "floor to 100); menu: every offer at menu prices, no price decision (Magentic tells its "
                              "businesses to quote menu prices; its code does not enforce it)")
    message_tokens: int = Field(24, ge=4, le=512, description="an LLM customer's inquiry: at most this many tokens")

    @field_validator("customer_llm", "business_llm", mode="before")
    @classmethod
    def _llm_block(cls, block: Any) -> Any:
        return None if block is None else check_llm_block(block)

    def llm_blocks(self, policy: str = "llm") -> list[tuple[str, Optional[dict[str, Any]]]]:
        """The customers' block, then the businesses' (each side the LLM plays: its own model, or the run's)."""
        if policy != "llm":
            return []
        return [(side, block) for side, block in (("customers", self.customer_llm), ("businesses", self.business_llm))
                if self.llm_side in ("both", side)]

    def data_paths(self) -> dict[str, Path]:
        folder = mdata.resolve(self.market, self.data_dir)
        return {} if folder is None else {"market": folder}

    @model_validator(mode="after")
    def _check(self) -> "MarketConfig":
        if self.population is not None:
            raise ValueError("market has no `population`; use customers, businesses, manipulative_n and llm_side")
        if self.pricing == "menu" and self.businesses == "discount":
            raise ValueError("businesses=discount needs pricing=decide (under pricing=menu every offer is at menu prices)")
        if self.data_dir is not None and not Path(self.data_dir).expanduser().is_dir():
            raise ValueError(f"data_dir {self.data_dir!r} is not a folder")
        folder = mdata.resolve(self.market, self.data_dir)  # unknown names and malformed files fail here
        businesses = self.businesses_n if folder is None else len(mdata.load_market(folder).businesses)
        for side, field, block in (("customers", "customer_llm", self.customer_llm),
                                   ("businesses", "business_llm", self.business_llm)):
            if block is not None and self.llm_side not in ("both", side):
                raise ValueError(f"{field} sets the model of LLM {side}, and llm_side={self.llm_side} makes them "
                                 "scripted")
        if self.manipulative_n > businesses:
            raise ValueError(f"manipulative_n ({self.manipulative_n}) is more than the market's {businesses} businesses")
        return self
