"""What reaches the terminal besides a command's own output: no library's warnings, unless `societas -v`.

Libraries warn about their own plans (transformers' FutureWarning on every LLM run, deprecations in
Mesa or pandas): nothing a user of societas can act on. For the length of a command they are hidden,
in its process and in the processes it starts (sweep workers, the app), as are the WARNING records of
libraries that set up no logging of their own (Python's handler of last resort). societas' own
warnings still show. `-v/--verbose` shows every warning once per place, deprecations included. A
filter the user chose (`python -W`, $PYTHONWARNINGS) is kept.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

#: warnings raised from these packages are societas' own, and shown
OWN = r"(sim|agents|scenarios|analysis|app_pages)(\.|$)"


@contextmanager
def library_warnings(verbose: bool) -> Iterator[None]:
    """Hide library warnings (show every warning with `verbose`) until the block ends, then put back what was
    there: the filters, $PYTHONWARNINGS and the last-resort handler's level (a command run in-process, as the
    tests do, leaves no trace)."""
    env = os.environ.get("PYTHONWARNINGS")
    last_resort = logging.lastResort
    level = last_resort.level if last_resort is not None else logging.NOTSET
    with warnings.catch_warnings():
        if verbose:
            warnings.simplefilter("default")
            os.environ["PYTHONWARNINGS"] = "default"
        elif not sys.warnoptions:
            warnings.simplefilter("ignore")
            warnings.filterwarnings("default", module=OWN)
            os.environ["PYTHONWARNINGS"] = "ignore"  # the processes it starts: one word (their filters match whole names)
            if last_resort is not None:
                last_resort.setLevel(logging.ERROR)
        try:
            yield
        finally:
            if env is None:
                os.environ.pop("PYTHONWARNINGS", None)
            else:
                os.environ["PYTHONWARNINGS"] = env
            if last_resort is not None:
                last_resort.setLevel(level)
