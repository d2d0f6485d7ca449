"""`python -m agents.sandbox`: nothing when the full sandbox for code an LLM wrote (bubblewrap) works here, else one
line on how to get it and which weaker levels can be named meanwhile (`make bootstrap` runs it). Always exits 0."""

from agents.sandbox.levels import hint, weaker_usable

if __name__ == "__main__":
    note = hint()
    if note is not None:
        usable = weaker_usable()
        print(note + (f" Usable here now: {', '.join(usable)}." if usable else " No weaker level is usable here either."))
