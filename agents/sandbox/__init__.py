"""Running code an LLM wrote: static checks, a locked-down child process, and the `synthesis` backend.

Layers, each enough to stop the common cases alone and together what the threat needs (a program the
LLM wrote, which may be wrong, slow, greedy or hostile, and must not crash, stall or reach out of a run):

1. `checks`: the program must parse, define `policy`, import only harmless modules and name no way out
   (open/eval/exec/compile/__import__, dunder and private attributes, frames); reward-hacking writes are named;
2. `worker` (in the child): resource limits (memory, CPU seconds, file size, open files), views of the
   allowed modules, guarded builtins, and an audit hook that lets the program open files in its scratch folder
   and nothing else; any attempt ends the child and is reported as a violation;
3. `kernel` (in the child): a seccomp filter (no process, thread, exec, socket, signal to others) and, at the
   `landlock` level (and under bubblewrap where the kernel has it), Landlock rules (files in the scratch folder
   only); these hold against a program that got past layer 2;
4. `process` (the parent): the child under the run's isolation level (`levels`: bubblewrap by default; a
   weaker one only by name, recorded with the run), a wall-clock limit per step, a killed process group on any
   stop, bounded replies.

Python-level restrictions alone are known to be escapable; process isolation alone lets a program read
what the process can. The kernel's layers are the walls; the Python layers make each attempt visible
(recorded as what it was).
"""

from agents.sandbox.backend import CodeBackend
from agents.sandbox.checks import ALLOWED_IMPORTS, Report, check, extract
from agents.sandbox.levels import GUARANTEES, require
from agents.sandbox.process import DEFAULT_LEVEL, LEVELS, Limits, Sandbox, StepResult, probe

__all__ = ["CodeBackend", "Sandbox", "Limits", "StepResult", "LEVELS", "DEFAULT_LEVEL", "GUARANTEES", "probe",
           "require", "check", "extract", "Report", "ALLOWED_IMPORTS"]
