"""Markets: load and validate Magentic Marketplace folders, find them by name, generate synthetic ones.

A market folder holds `customers/*.yaml` and `businesses/*.yaml` in the format of
microsoft/multi-agent-marketplace (`data/`), and optionally `baseline_utilities.json`.
Customer: `id`, `name`, `request` (text), `menu_features` {item: value to the customer},
`amenity_features` [required amenities]. Business: `id`, `name`, `description`, `rating`,
`menu_features` {item: price}, `amenity_features` {amenity: bool}, `min_price_factor`.

Every problem with a file raises `MarketError` with one line naming the file and the field.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import yaml

try:  # the C loader is ~10x faster on a 400-file market
    from yaml import CSafeLoader as _Loader
except ImportError:  # pragma: no cover
    from yaml import SafeLoader as _Loader  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = "synthetic"
DATA_ENV = "SOCIETAS_DATA_DIR"
SOURCE_HINT = "get the folder data/ of microsoft/multi-agent-marketplace"


class MarketError(ValueError):
    """A market cannot be found or one of its files is malformed (one line, file and field named)."""


@dataclass(frozen=True)
class Customer:
    """A customer's request: items with the value it puts on each, and required amenities."""

    id: str
    name: str
    request: str
    items: dict[str, float]
    amenities: tuple[str, ...]

    @property
    def value(self) -> float:
        """Sum of the requested items' values."""
        return sum(self.items.values())


@dataclass(frozen=True)
class Business:
    """A business: its menu (item -> price), amenities, rating, price floor and description."""

    id: str
    name: str
    description: str
    rating: float
    menu: dict[str, float]
    amenities: dict[str, bool]
    min_price_factor: float

    def has_amenities(self, required: tuple[str, ...]) -> bool:
        return all(self.amenities.get(a, False) for a in required)

    def sells_all(self, items: dict[str, float]) -> bool:
        return all(i in self.menu for i in items)


@dataclass(frozen=True)
class Market:
    """A whole market, as loaded or generated; `target` is the business whose share is tracked."""

    name: str
    source: str
    customers: tuple[Customer, ...]
    businesses: tuple[Business, ...]
    baselines: Optional[dict[str, Any]] = None
    target: Optional[str] = None  # competitive_description markets: business_0001
    manipulated: tuple[str, ...] = field(default_factory=tuple)  # businesses whose description manipulates
    digest: str = ""


# ----- finding markets ------------------------------------------------------------------------
def default_data_dir() -> Optional[Path]:
    """`$SOCIETAS_DATA_DIR` if set, else ../shared/data/magentic beside the repository when it exists."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    guess = ROOT.parent / "shared" / "data" / "magentic"
    return guess if guess.is_dir() else None


@lru_cache(maxsize=8)
def catalogue(data_dir: str) -> dict[str, Path]:
    """Every market folder under `data_dir`: its relative path, and its folder name where unique."""
    base = Path(data_dir)
    found = sorted(p.parent for p in base.rglob("customers") if p.is_dir() and (p.parent / "businesses").is_dir())
    out: dict[str, Path] = {}
    names: dict[str, list[Path]] = {}
    for p in found:
        out[p.relative_to(base).as_posix()] = p
        names.setdefault(p.name, []).append(p)
    for name, paths in names.items():
        if len(paths) == 1:
            out.setdefault(name, paths[0])
    return out


def resolve(market: str, data_dir: Optional[str]) -> Optional[Path]:
    """The folder of a market name or path; None for `synthetic`. Raises MarketError otherwise."""
    if market == SYNTHETIC:
        return None
    p = Path(market).expanduser()
    if p.is_dir():
        if not (p / "customers").is_dir() or not (p / "businesses").is_dir():
            raise MarketError(f"market folder {str(p)!r} needs customers/ and businesses/ subfolders")
        return p
    base = Path(data_dir).expanduser() if data_dir else default_data_dir()
    if base is None or not base.is_dir():
        where = f"data_dir {str(base)!r} does not exist" if base else f"no data directory (set ${DATA_ENV} or data_dir)"
        raise MarketError(f"unknown market {market!r}: {where}; {SOURCE_HINT}, or use market=synthetic")
    known = catalogue(str(base.resolve()))
    if market not in known:
        valid = ", ".join([SYNTHETIC, *sorted(k for k in known if "/" not in k)])
        raise MarketError(f"unknown market {market!r}; valid: {valid} (or a folder path, or a path under {str(base)!r})")
    return known[market]


# ----- loading and validating -----------------------------------------------------------------
def _bad(path: Path, fld: str, problem: str) -> MarketError:
    return MarketError(f"malformed market file {str(path)!r}: field {fld!r} {problem}")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except UnicodeDecodeError:
        raise MarketError(f"malformed market file {str(path)!r}: not UTF-8 text (binary, or another encoding)") from None
    except OSError as exc:
        raise MarketError(f"cannot read market file {str(path)!r}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise MarketError(f"malformed market file {str(path)!r}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise MarketError(f"malformed market file {str(path)!r}: must hold a mapping of fields")
    return data


def _text(path: Path, data: dict, fld: str, required: bool = True) -> str:
    if fld not in data or data[fld] is None:
        if required:
            raise _bad(path, fld, "is missing")
        return ""
    if not isinstance(data[fld], (str, int, float)) or isinstance(data[fld], bool):
        raise _bad(path, fld, f"must be text (got {type(data[fld]).__name__})")
    return str(data[fld])


def _number(path: Path, fld: str, value: Any, lo: float, hi: float = math.inf, lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _bad(path, fld, f"must be a finite number (got {value!r})")
    if value < lo or (lo_open and value <= lo) or value > hi:
        rng = f"> {lo:g}" if lo_open else f">= {lo:g}"
        rng += f" and <= {hi:g}" if hi != math.inf else ""
        raise _bad(path, fld, f"must be {rng} (got {value!r})")
    return float(value)


def _menu(path: Path, data: dict, what: str) -> dict[str, float]:
    menu = data.get("menu_features")
    if menu is None:
        raise _bad(path, "menu_features", "is missing")
    if not isinstance(menu, dict) or not menu:
        raise _bad(path, "menu_features", "must be a non-empty mapping of item: " + what)
    return {str(k): _number(path, f"menu_features.{k}", v, 0.0) for k, v in menu.items()}


def parse_customer(path: Path, data: dict) -> Customer:
    amen = data.get("amenity_features", [])
    if amen is None:
        amen = []
    if not isinstance(amen, list) or not all(isinstance(a, str) for a in amen):
        raise _bad(path, "amenity_features", "must be a list of amenity names")
    return Customer(_text(path, data, "id"), _text(path, data, "name", False), _text(path, data, "request"),
                    _menu(path, data, "value"), tuple(amen))


def parse_business(path: Path, data: dict) -> Business:
    amen = data.get("amenity_features")
    if amen is None:
        raise _bad(path, "amenity_features", "is missing")
    if not isinstance(amen, dict) or not all(isinstance(v, bool) for v in amen.values()):
        raise _bad(path, "amenity_features", "must be a mapping of amenity: true/false")
    if "rating" not in data:
        raise _bad(path, "rating", "is missing")
    if "min_price_factor" not in data:
        raise _bad(path, "min_price_factor", "is missing")
    return Business(
        _text(path, data, "id"), _text(path, data, "name"), _text(path, data, "description", False),
        _number(path, "rating", data["rating"], 0.0, 1.0), _menu(path, data, "price"),
        {str(k): v for k, v in amen.items()}, _number(path, "min_price_factor", data["min_price_factor"], 0.0, 1.0, lo_open=True),
    )


def check_market(customers: list[tuple[Path, Customer]], businesses: list[tuple[Path, Business]], where: str) -> None:
    """Cross-file checks: non-empty sides, unique ids, one set of amenities that every business rates, and every
    customer's required amenity among them."""
    if not customers:
        raise MarketError(f"market {where!r} has no customers (customers/*.yaml)")
    if not businesses:
        raise MarketError(f"market {where!r} has no businesses (businesses/*.yaml)")
    for side in (customers, businesses):
        seen: dict[str, Path] = {}
        for path, x in side:
            if x.id in seen:
                raise _bad(path, "id", f"duplicates {x.id!r} of {str(seen[x.id])!r}")
            seen[x.id] = path
    # the market's amenities: those most businesses rate (every business rates each of them true or false)
    sets = Counter(frozenset(b.amenities) for _, b in businesses)
    known = set(max(sets, key=lambda k: (sets[k], sorted(k))))
    for path, b in businesses:
        if set(b.amenities) != known:
            odd, missing = sorted(set(b.amenities) - known), sorted(known - set(b.amenities))
            what = f"names unknown amenity {odd[0]!r}" if odd else f"does not rate amenity {missing[0]!r}"
            raise _bad(path, "amenity_features", f"{what}; the market's businesses rate: {', '.join(sorted(known))}")
    for path, c in customers:
        for a in c.amenities:
            if a not in known:
                raise _bad(path, "amenity_features", f"names unknown amenity {a!r}; known: {', '.join(sorted(known))}")


@lru_cache(maxsize=16)
def _load(folder: str, stamp: float) -> Market:
    base = Path(folder)
    customers = [(p, parse_customer(p, _read(p))) for p in sorted((base / "customers").glob("*.yaml"))]
    businesses = [(p, parse_business(p, _read(p))) for p in sorted((base / "businesses").glob("*.yaml"))]
    check_market(customers, businesses, folder)
    baselines = None
    bpath = base / "baseline_utilities.json"
    if bpath.is_file():
        try:
            baselines = json.loads(bpath.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise MarketError(f"malformed market file {str(bpath)!r}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise MarketError(f"malformed market file {str(bpath)!r}: not valid JSON ({exc.msg})") from None
    competitive = "competitive_description" in base.parts
    target = "business_0001" if competitive and any(b.id == "business_0001" for _, b in businesses) else None
    manipulated = (target,) if target and not base.name.endswith("_control") else ()
    digest = hashlib.sha256()
    for _, x in [*customers, *businesses]:
        digest.update(repr(x).encode())
    return Market(base.name, folder, tuple(c for _, c in customers), tuple(b for _, b in businesses),
                  baselines, target, manipulated, digest.hexdigest()[:16])


def load_market(folder: Path) -> Market:
    """Load and validate a market folder (cached while its files are unchanged)."""
    folder = folder.resolve()
    stamp = max((p.stat().st_mtime for p in folder.rglob("*.yaml")), default=0.0)
    return _load(str(folder), stamp)


# ----- synthetic markets ---------------------------------------------------------------------
_ADJ = ["Smoky", "Spicy", "Classic", "Roasted", "Grilled", "Crispy", "Sweet", "Tangy", "Golden", "Fresh",
        "Savory", "Zesty", "Charred", "Creamy", "Rustic", "Chipotle", "Garlic", "Lime", "Honey", "Herbed"]
_DISH = ["Tacos", "Burrito", "Quesadilla", "Enchiladas", "Tamales", "Nachos", "Empanadas", "Churros", "Salad",
         "Soup", "Tostada", "Fajitas", "Flan", "Agua Fresca", "Elote", "Sopes", "Torta", "Pozole", "Mole", "Ceviche"]
AMENITIES = ["Onsite Parking", "Live Music", "Takes Reservations", "Private Dining", "Wheelchair Accessible",
             "Children's Menu", "Outdoor Seating", "Large Groups", "Happy Hour", "Free Wifi"]
_NAME_A = ["Casa", "El", "La", "Cocina", "Taqueria", "Cantina", "Mercado", "Rancho", "Sabor", "Puesto"]
_NAME_B = ["Azul", "Dorado", "Verde", "del Sol", "Luna", "Fuego", "Maya", "Norte", "Bonita", "Rosa", "Grande", "Vieja"]


def generate(customers_n: int, businesses_n: int, seed: int) -> Market:
    """A seeded synthetic market in the Magentic format, of any size.

    Each customer is drawn from a progenitor business (as in the original data): 1-3 of its
    items, valued 1.0-1.5x their price there, and 0-2 of its amenities, so every customer has at
    least one business that meets its request. Menus hold 8-16 of 400 catalogue items at
    0.8-1.25x the item's base price.
    """
    rng = random.Random(seed)
    items = [f"{a} {d}" for a in _ADJ for d in _DISH]
    base_price = {i: round(rng.uniform(2.0, 16.0), 2) for i in items}
    businesses = []
    for k in range(businesses_n):
        menu = {i: round(base_price[i] * rng.uniform(0.8, 1.25), 2) for i in rng.sample(items, rng.randint(8, 16))}
        amen = {a: rng.random() < 0.5 for a in AMENITIES}
        name = f"{rng.choice(_NAME_A)} {rng.choice(_NAME_B)} {k + 1}"
        dishes = ", ".join(list(menu)[:3])
        businesses.append(Business(
            f"business_{k + 1:04d}", name, f"{name} serves Mexican favourites such as {dishes}.",
            round(rng.random(), 2), menu, amen, round(rng.uniform(0.7, 0.95), 2),
        ))
    customers = []
    for k in range(customers_n):
        b = businesses[rng.randrange(businesses_n)]
        chosen = rng.sample(list(b.menu), rng.randint(1, 3))
        wanted = {i: round(b.menu[i] * rng.uniform(1.0, 1.5), 2) for i in chosen}
        has = [a for a, v in b.amenities.items() if v]
        amen = tuple(rng.sample(has, min(len(has), rng.randint(0, 2))))
        listed = " and ".join(f"'{i}' (1)" for i in wanted)
        extra = f" and offers {' and '.join(amen).lower()}" if amen else ""
        customers.append(Customer(f"customer_{k + 1:04d}", f"Customer {k + 1}",
                                  f"Could you find a business that serves {listed}{extra}? I want to order these items.",
                                  wanted, amen))
    return Market(SYNTHETIC, f"synthetic:{customers_n}x{businesses_n}:{seed}", tuple(customers), tuple(businesses))
