"""`societas interview` and `survey`: ask a stored run's LLM agents a question at a tick, without changing the run."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.table import Table

from societas.cli.app import DbOption, JsonOption, app, fail, fmt, open_store, out

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from runner.studies import StudyReport

TickOption = typer.Option(None, "--tick", help="the tick whose state the agents answer from (default: the run's last)")
ChoicesOption = typer.Option(None, "--choices", help="the answer is one of these options, comma-separated "
                             "(constrained like any decision); default: free text")
LikertOption = typer.Option(False, "--likert", help="the answer is on the five-point Likert scale, strongly disagree .. "
                            "strongly agree (scored 1-5)")
TokensOption = typer.Option(60, "--max-tokens", help="a free-text answer's length bound, in tokens (1-512)")


def _choices(text: Optional[str]) -> Optional[list[str]]:
    return None if text is None else text.split(",")


def _asked(call: Any) -> Any:
    """Run a study; a replay that differs from the stored run, or a model that fails, exits 1 with one line."""
    from runner.studies import StudyFailed

    try:
        return call()
    except StudyFailed as exc:
        fail(str(exc), code=1)


@app.command()
def interview(
    run_id: str = typer.Argument(..., help="run id or unique prefix"),
    question: str = typer.Argument(..., help="the question, as the agent reads it"),
    agent: int = typer.Option(..., "--agent", help="the agent's id (see `societas show RUN` or the app's Agents page)"),
    tick: Optional[int] = TickOption,
    choices: Optional[str] = ChoicesOption,
    likert: bool = LikertOption,
    max_tokens: int = TokensOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Ask one LLM agent of a stored run a question from its state at a tick (persona, memory, what it saw), through
    the run's model for that agent; the run is replayed from its cache up to the tick and left unchanged. Stored as a
    run of origin `interview` (asking again is answered from the cache). A scripted agent cannot be interviewed."""
    from runner.studies import interview as ask

    store = open_store(db, create=False)
    report = _asked(lambda: ask(store, store.get_run(run_id).id, agent, question, tick=tick, choices=_choices(choices),
                                likert=likert, max_tokens=max_tokens))
    if as_json:
        print(json.dumps(report.to_json(), default=str))
        return
    row = report.rows[0]
    out.print(f"[bold]interview {report.run_id}[/] of run {report.source_id} at tick {report.tick}: agent "
              f"{row['agent_id']} ({row['group'] or row['backend']}, {row['model']})"
              + (" · from the cache" if row["cached"] else ""), soft_wrap=True, highlight=False)
    out.print(f"Q: {report.question}", soft_wrap=True, highlight=False, markup=False)
    answer = "(no usable answer: " + str(row["reason"]) + ")" if row["fallback"] else str(row["answer"])
    out.print(f"A: {answer}", soft_wrap=True, highlight=False, markup=False)


@app.command()
def survey(
    run_id: Optional[str] = typer.Argument(None, help="run id or unique prefix (or --sweep SWEEP_ID)"),
    question: Optional[str] = typer.Argument(None, help="the question, as every agent reads it"),
    tick: Optional[int] = TickOption,
    choices: Optional[str] = ChoicesOption,
    likert: bool = LikertOption,
    group: Optional[str] = typer.Option(None, "--group", help="ask only this group: a population group or market side "
                                        "by its name (group 2, customers), a backend llm:K, or a role (fisher, seller)"),
    sweep_id: Optional[str] = typer.Option(None, "--sweep", help="survey every ended run of a sweep at its last tick: "
                                           "one table across its conditions"),
    max_tokens: int = TokensOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Ask every LLM agent of a stored run (or a group) a question from its state at a tick, in one batch per model;
    prints a table of answers. Stored as a run of origin `survey`. Scripted agents are not asked (a scripted agent
    cannot be interviewed). With --sweep: every ended run of the sweep at its last tick, one table across conditions."""
    from runner.studies import survey as ask
    from runner.studies import survey_sweep

    if sweep_id is not None:
        if question is None and run_id is not None:  # `survey --sweep ID "question"`: the one argument is the question
            run_id, question = None, run_id
        if run_id is not None or tick is not None:
            fail("--sweep surveys each run of a sweep at its last tick: give the question only, no RUN_ID or --tick")
        if question is None:
            fail("give the question to ask")
        store = open_store(db, create=False)
        found = _asked(lambda: survey_sweep(store, sweep_id, question, choices=_choices(choices), likert=likert,
                                            group=group, max_tokens=max_tokens))
        if as_json:
            print(json.dumps(found.to_json(), default=str))
            return
        out.print(f"[bold]survey of sweep {found.sweep_id}[/]: {len(found.reports)} runs at their last tick, "
                  f"{len(found.rows)} agents asked" + (f"; {len(found.skipped_runs)} runs without LLM agents skipped"
                                                      if found.skipped_runs else ""), soft_wrap=True, highlight=False)
        out.print(f"Q: {found.question}", soft_wrap=True, highlight=False, markup=False)
        cols = list(found.cells[0]) if found.cells else []
        table = Table(title="answers per condition" + (" (share of each choice)" if found.reports[0].choices else ""))
        for c in cols:
            table.add_column(str(c), overflow="fold")
        for cell in found.cells:
            table.add_row(*(fmt(cell[c]) for c in cols))
        out.print(table)
        return
    if run_id is None or question is None:
        fail("give a RUN_ID and the question (or --sweep SWEEP_ID and the question)")
    store = open_store(db, create=False)
    report = _asked(lambda: ask(store, store.get_run(run_id).id, question, tick=tick, choices=_choices(choices),
                                likert=likert, group=group, max_tokens=max_tokens))
    if as_json:
        print(json.dumps(report.to_json(), default=str))
        return
    print_survey(report)


def print_survey(report: StudyReport) -> None:
    """A survey's table of answers, and the count of each choice."""
    cached = sum(r["cached"] for r in report.rows)
    out.print(f"[bold]survey {report.run_id}[/] of run {report.source_id} at tick {report.tick}: {len(report.rows)} "
              f"agents asked" + (f", {report.skipped} scripted agents not asked" if report.skipped else "")
              + (f"; {cached} answers from the cache" if cached else ""), soft_wrap=True, highlight=False)
    out.print(f"Q: {report.question}", soft_wrap=True, highlight=False, markup=False)
    table = Table()
    for col in ("agent", "group", "model", "answer"):
        table.add_column(col, overflow="fold")
    for r in report.rows:
        answer = "(no usable answer)" if r["fallback"] else str(r["answer"])
        if r["score"] is not None:
            answer += f" ({r['score']})"
        table.add_row(str(r["agent_id"]), r["group"] or r["backend"], r["model"], answer)
    out.print(table, markup=False)
    if report.counts:
        out.print("counts: " + ", ".join(f"{k} {v}" for k, v in report.counts.items()), soft_wrap=True, highlight=False,
                  markup=False)
