"""Start the app's server warm: `python -m app_pages.serve [--say TEXT] [STREAMLIT RUN OPTIONS] [-- APP ARGS]`.

Streamlit runs app.py (and the page it routes to) anew for every visit, inside the server's process, so whatever a
page imports is imported by the first visit that needs it: pandas, Altair, SQLAlchemy, the scenario classes and
with them Mesa and SciPy; and the first chart makes Altair load and compile its Vega-Lite schema. On 2 cores that
was 2-3 s of every page's first render. This launcher pays it before the server listens, so the first visit costs
what a later one does: it imports every module that app.py and the pages import at their top, loads the built-in
scenario classes, validates one chart, then hands over to `streamlit run app.py` in the same process. `--say TEXT`
prints TEXT once the server is about to listen (`societas app` says where it listens this way). A plain
`streamlit run app.py` serves the same app, only its first visits are slower.
"""

from __future__ import annotations

import ast
import logging
import sys
import time
from pathlib import Path

#: Streamlit's cache decorators check their settings against the runtime's storage and warn that there is none yet
#: (the pages' modules are imported before the server starts): true, and harmless, since a cache is made at its
#: first call, inside the server
logging.getLogger("streamlit.runtime.caching.cache_data_api").addFilter(
    lambda record: not record.getMessage().startswith("No runtime found"))

import altair as alt  # noqa: E402
import pandas as pd  # noqa: E402
from streamlit.web.cli import main as streamlit_cli  # noqa: E402

from app_pages.common import PAGES  # noqa: E402
from scenarios.registry import BUILTIN, REGISTRY  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def page_imports(root: Path = ROOT) -> list[tuple[str, tuple[str, ...]]]:
    """(module, names taken from it) of every module-level import of app.py and of the pages it routes to, in order."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for path in [root / "app.py", *(root / file for _, file, _, _ in PAGES)]:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Import):
                found += [(alias.name, ()) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level and node.module != "__future__":
                found.append((node.module, tuple(alias.name for alias in node.names)))
    return list(dict.fromkeys(found))


def warm(root: Path = ROOT) -> float:
    """Import what the pages import, load the built-in scenario classes, draw one chart's spec; the seconds it took."""
    start = time.perf_counter()
    steps = [(f"import {module}", lambda m=module, n=names: __import__(m, fromlist=n))  # (as `from m import n` does)
             for module, names in page_imports(root)]
    steps += [(f"scenario {name}", lambda n=name: REGISTRY[n]) for name in sorted(BUILTIN)]
    for what, step in [*steps, ("a chart's spec", _validate_a_chart)]:
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the app still starts: the page that needs it says what failed
            print(f"warming the app: {what} failed ({type(exc).__name__}: {exc}); left to the first visit", file=sys.stderr)
    return time.perf_counter() - start


def _validate_a_chart() -> None:
    """One layered chart with a selection, turned into its spec: Altair loads and compiles the Vega-Lite schema once
    per process, here rather than in a visitor's first chart."""
    points = alt.Chart(pd.DataFrame({"tick": [1, 2], "value": [0.5, 1.0], "run": ["a", "b"]})).encode(
        x=alt.X("tick:Q"), y=alt.Y("value:Q"), color=alt.Color("run:N"))
    (points.mark_line() + points.mark_point().add_params(alt.selection_point(fields=["tick"]))).to_dict()


def main(argv: list[str]) -> int:
    """`warm`, then `streamlit run` with `argv` (its script, options and `--` app arguments; app.py by default)."""
    say = None
    if argv[:1] == ["--say"] and len(argv) > 1:
        say, argv = argv[1], argv[2:]
    if not argv or argv[0].startswith("-"):
        argv = [str(ROOT / "app.py"), *argv]
    warm()
    if say:  # (in the terminal's own encoding: an em dash where it has one)
        encoding = sys.stdout.encoding or "utf-8"
        print(say.encode(encoding, errors="replace").decode(encoding), flush=True)
    return streamlit_cli(args=["run", *argv], prog_name="streamlit", standalone_mode=True) or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
