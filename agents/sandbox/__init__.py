"""Running code an LLM wrote: static checks, a locked-down child process, and the `synthesis` backend.

Layers, each enough to stop the common cases alone and together what the threat needs (a program the
LLM wrote, which may be wrong, slow, greedy or hostile, and must not crash, stall or reach out of a run):

1. `checks`: the program must parse, define `policy`, import only harmless modules and name no way out
   (open/eval/exec/compile/__import__, dunder attributes); reward-hacking writes are named;
2. `worker` (in the child): resource limits (memory, CPU seconds, file size, open files), an audit hook
   that refuses imports, compiles, files outside its scratch folder, sockets, processes, signals and
   ctypes, a restricted builtins table and importer, a read-only observation; JSON over pipes;
3. `process` (the parent): the child in bubblewrap (no network, a file system of the Python installation
   and its scratch folder only) or a network namespace where bubblewrap is missing, a wall-clock limit
   per step, a killed process group on any stop, bounded replies.

Python-level restrictions alone are known to be escapable; process isolation alone lets a program read
what the process can. Here the program runs in a process of its own whose file system holds nothing of
the project or its store, with no network, under kernel resource limits; the Python layers make each
attempt visible (recorded as what it was) rather than being the only wall.
"""

from agents.sandbox.backend import CodeBackend
from agents.sandbox.checks import ALLOWED_IMPORTS, Report, check, extract
from agents.sandbox.process import Limits, Sandbox, StepResult, level

__all__ = ["CodeBackend", "Sandbox", "Limits", "StepResult", "level", "check", "extract", "Report", "ALLOWED_IMPORTS"]
